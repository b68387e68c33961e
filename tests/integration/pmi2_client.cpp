// A PMI-2 client built on Slurm's own libpmi2 (Debian's libpmi2-0-dev: the client that
// `srun --mpi=pmi2` serves, and the PMI-2 wire protocol MPICH-family libraries speak): it
// checks what a rank is told and moves keys through the job's key-value space, as an MPI
// library's start does.
//
//   pmi2-client SEED [--semicolons] [--abort-rank R]
// Each rank: PMI2_Init; the job's process mapping (which ranks share its node); a node
// attribute put by the node's first rank and read by the others with wait; a key of its own
// holding a value made from SEED and its rank ('=' in it, and with --semicolons ';', which
// the protocol doubles and Slurm's plugin cuts a value at; up to 1000 bytes); one
// fence; then every rank's key, each checked byte for byte. Prints "pmi2: rank R of N: node
// ranks A-B, mapping M, read N keys: ok" (the same line under any launcher that runs the same
// layout), or a line saying what was wrong and exits 4; 5 when a call fails. --abort-rank R:
// rank R calls PMI2_Abort(1, ...) after the fence.
#include <slurm/pmi2.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

int me = -1;

[[noreturn]] void failed(const char* call, int rc) {
  std::printf("pmi2: rank %d: %s failed: %d\n", me, call, rc);
  std::fflush(stdout);
  std::exit(5);
}

// Rank r's value, as every rank can recompute it: SEED and r drive the bytes.
bool semicolons = false;

std::string value_of(unsigned seed, int r) {
  std::mt19937 random(seed * 7919u + static_cast<unsigned>(r));
  const std::string alphabet = semicolons ? "abcXYZ0189;=-_.,:" : "abcXYZ0189=-_.,:";  // ';', '=': the protocol's
  std::string value = "r" + std::to_string(r) + (semicolons ? ";" : ":");
  for (std::size_t n = 1 + random() % 900; n > 0; --n) value += alphabet[random() % alphabet.size()];
  return value;
}

// The node of each rank from MPICH's "(vector,(node,count,size),...)".
std::vector<int> nodes_of(const std::string& mapping, int size) {
  std::vector<int> node(static_cast<std::size_t>(size), -1);
  int rank = 0;
  for (std::size_t at = mapping.find(",("); at != std::string::npos; at = mapping.find(",(", at + 1)) {
    int first = 0, count = 0, per = 0;
    if (std::sscanf(mapping.c_str() + at, ",(%d,%d,%d)", &first, &count, &per) != 3) return {};
    for (int n = first; n < first + count; ++n)
      for (int i = 0; i < per && rank < size; ++i) node[static_cast<std::size_t>(rank++)] = n;
  }
  return rank == size ? node : std::vector<int>{};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: pmi2-client SEED [--semicolons] [--abort-rank R]\n");
    return 2;
  }
  const unsigned seed = static_cast<unsigned>(std::strtoul(argv[1], nullptr, 10));
  int abort_rank = -1;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--semicolons") == 0) {
      semicolons = true;
    } else if (std::strcmp(argv[i], "--abort-rank") == 0 && i + 1 < argc) {
      abort_rank = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "pmi2-client: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  int spawned = 0, size = 0, appnum = 0;
  if (const int rc = PMI2_Init(&spawned, &size, &me, &appnum); rc != PMI2_SUCCESS) failed("PMI2_Init", rc);
  char jobid[PMI2_MAX_VALLEN] = {};
  if (const int rc = PMI2_Job_GetId(jobid, sizeof jobid); rc != PMI2_SUCCESS) failed("PMI2_Job_GetId", rc);
  char mapping[PMI2_MAX_VALLEN] = {};
  int found = 0;
  if (const int rc = PMI2_Info_GetJobAttr("PMI_process_mapping", mapping, sizeof mapping, &found); rc != PMI2_SUCCESS)
    failed("PMI2_Info_GetJobAttr", rc);
  int wrong = 0;
  const std::vector<int> node = nodes_of(found ? mapping : "", size);
  if (node.empty()) {
    std::printf("pmi2: rank %d: PMI_process_mapping '%s' (found %d) is not a mapping of %d ranks\n", me, mapping, found,
                size);
    return 4;
  }
  int first_local = me, last_local = me;
  while (first_local > 0 && node[static_cast<std::size_t>(first_local - 1)] == node[static_cast<std::size_t>(me)])
    --first_local;
  while (last_local + 1 < size && node[static_cast<std::size_t>(last_local + 1)] == node[static_cast<std::size_t>(me)])
    ++last_local;
  // A node attribute: the node's first rank puts it; the others wait for it.
  const std::string attribute = "first-of-node=" + std::to_string(first_local);
  if (me == first_local) {
    if (const int rc = PMI2_Info_PutNodeAttr("hyrun-test-leader", attribute.c_str()); rc != PMI2_SUCCESS)
      failed("PMI2_Info_PutNodeAttr", rc);
  } else {
    char got[PMI2_MAX_VALLEN] = {};
    if (const int rc = PMI2_Info_GetNodeAttr("hyrun-test-leader", got, sizeof got, &found, 1); rc != PMI2_SUCCESS)
      failed("PMI2_Info_GetNodeAttr", rc);
    if (!found || attribute != got) {
      std::printf("pmi2: rank %d: node attribute is '%s' (found %d), expected '%s'\n", me, got, found,
                  attribute.c_str());
      ++wrong;
    }
  }
  const std::string key = "hyrun-test-" + std::to_string(me);
  if (const int rc = PMI2_KVS_Put(key.c_str(), value_of(seed, me).c_str()); rc != PMI2_SUCCESS)
    failed("PMI2_KVS_Put", rc);
  if (const int rc = PMI2_KVS_Fence(); rc != PMI2_SUCCESS) failed("PMI2_KVS_Fence", rc);
  if (me == abort_rank) PMI2_Abort(1, "pmi2-client: aborting as asked");
  int read = 0;
  for (int r = 0; r < size; ++r) {
    char got[PMI2_MAX_VALLEN + 1] = {};
    int length = 0;
    const std::string theirs = "hyrun-test-" + std::to_string(r);
    if (const int rc = PMI2_KVS_Get(jobid, PMI2_ID_NULL, theirs.c_str(), got, sizeof got, &length); rc != PMI2_SUCCESS)
      failed("PMI2_KVS_Get", rc);
    const std::string want = value_of(seed, r);
    if (want != got || length != static_cast<int>(want.size())) {
      std::printf("pmi2: rank %d: rank %d's value is '%.60s...' (%d bytes), expected '%.60s...' (%zu bytes)\n", me, r,
                  got, length, want.c_str(), want.size());
      ++wrong;
    } else {
      ++read;
    }
  }
  if (const int rc = PMI2_Finalize(); rc != PMI2_SUCCESS) failed("PMI2_Finalize", rc);
  if (wrong != 0) return 4;
  std::printf("pmi2: rank %d of %d: node ranks %d-%d, mapping %s, read %d keys: ok\n", me, size, first_local,
              last_local, mapping, read);
  return 0;
}
