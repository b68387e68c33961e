// A PMIx client that reads back every key docs/pmix.md ("What each rank is told") lists, for
// itself and for every peer, and checks each against the job's layout; then an allgather and
// an alltoall of keys in one collect-data fence, as OpenSHMEM and NVSHMEM bootstrap over PMIx.
// Not read: PMIX_NODEID by rank, which a libpmix 4.2.2 client finds in a job of one node only
// (a node-level key it looks up by host), under srun's own PMIx server too.
//
//   pmix-keys-client NODES PER_NODE: a job of NODES x PER_NODE ranks, PER_NODE on each node,
//   node n holding ranks n*PER_NODE .. n*PER_NODE+PER_NODE-1. Prints "pmix-keys: rank R of N:
//   ok" or one line a wrong value; exit 4 when a value is wrong, 5 when a call fails.
#include <pmix.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>

namespace {

pmix_proc_t me;
int wrong = 0;

void say_wrong(const std::string& what, const std::string& got, const std::string& want) {
  std::printf("pmix-keys: rank %u: %s is '%s', expected '%s'\n", me.rank, what.c_str(), got.c_str(), want.c_str());
  ++wrong;
}

// A value as text: numbers in decimal, strings as they are, a rank as its number.
std::optional<std::string> text_of(const pmix_value_t* v) {
  switch (v->type) {
    case PMIX_STRING: return std::string(v->data.string != nullptr ? v->data.string : "");
    case PMIX_UINT32: return std::to_string(v->data.uint32);
    case PMIX_UINT16: return std::to_string(v->data.uint16);
    case PMIX_UINT64: return std::to_string(v->data.uint64);
    case PMIX_INT: return std::to_string(v->data.integer);
    case PMIX_UINT: return std::to_string(v->data.uint);
    case PMIX_SIZE: return std::to_string(v->data.size);
    case PMIX_PROC_RANK: return std::to_string(v->data.rank);
    default: return std::nullopt;
  }
}

// The value of `key` for `rank` (PMIX_RANK_WILDCARD: the job's), or nullopt (said).
std::optional<std::string> get(pmix_rank_t rank, const char* key) {
  pmix_proc_t proc;
  PMIX_LOAD_PROCID(&proc, me.nspace, rank);
  pmix_value_t* value = nullptr;
  const pmix_status_t rc = PMIx_Get(&proc, key, nullptr, 0, &value);
  if (rc != PMIX_SUCCESS) {
    std::printf("pmix-keys: rank %u: PMIx_Get of %s for rank %d failed: %s\n", me.rank, key, static_cast<int>(rank),
                PMIx_Error_string(rc));
    ++wrong;
    return std::nullopt;
  }
  auto text = text_of(value);
  if (!text) say_wrong(std::string(key) + "'s type", std::to_string(value->type), "a number or a string");
  PMIX_VALUE_RELEASE(value);
  return text;
}

void expect(pmix_rank_t rank, const char* key, const std::string& want) {
  const auto got = get(rank, key);
  const std::string whose = rank == PMIX_RANK_WILDCARD ? "the job's" : "rank " + std::to_string(rank) + "'s";
  if (got && *got != want) say_wrong(whose + " " + key, *got, want);
}

std::string range(unsigned first, unsigned count) {
  std::string out;
  for (unsigned i = 0; i < count; ++i) out += (i ? "," : "") + std::to_string(first + i);
  return out;
}

void check_layout(unsigned nodes, unsigned per_node) {
  const unsigned size = nodes * per_node, node = me.rank / per_node;
  for (const char* key : {PMIX_JOB_SIZE, PMIX_UNIV_SIZE, PMIX_MAX_PROCS, PMIX_APP_SIZE})
    expect(PMIX_RANK_WILDCARD, key, std::to_string(size));
  expect(PMIX_RANK_WILDCARD, PMIX_JOB_NUM_APPS, "1");
  expect(PMIX_RANK_WILDCARD, PMIX_NUM_NODES, std::to_string(nodes));
  expect(PMIX_RANK_WILDCARD, PMIX_JOBID, me.nspace);
  for (const char* key : {PMIX_TMPDIR, PMIX_NSDIR})
    if (const auto dir = get(PMIX_RANK_WILDCARD, key); dir && dir->empty()) say_wrong(key, "", "a directory");
  expect(PMIX_RANK_WILDCARD, PMIX_LOCAL_SIZE, std::to_string(per_node));
  expect(PMIX_RANK_WILDCARD, PMIX_LOCAL_PEERS, range(node * per_node, per_node));
  expect(PMIX_RANK_WILDCARD, PMIX_LOCALLDR, std::to_string(node * per_node));
  const auto my_host = get(me.rank, PMIX_HOSTNAME);
  for (pmix_rank_t peer = 0; peer < size; ++peer) {
    const unsigned peer_node = peer / per_node;
    expect(peer, PMIX_LOCAL_RANK, std::to_string(peer % per_node));
    expect(peer, PMIX_NODE_RANK, std::to_string(peer % per_node));
    expect(peer, PMIX_APPNUM, "0");
    const auto host = get(peer, PMIX_HOSTNAME);
    if (host && my_host && (*host == *my_host) != (peer_node == node))
      say_wrong("rank " + std::to_string(peer) + "'s host", *host, (peer_node == node ? "" : "not ") + *my_host);
  }
}

// Every rank puts one value for all and one for each peer, one fence collects them, and every
// rank reads every peer's value for all and the one addressed to it.
int exchange(unsigned size) {
  const std::string salt = std::to_string(std::random_device{}() % 100000);
  auto put = [](const std::string& key, const std::string& text) {
    pmix_value_t value;
    PMIX_VALUE_LOAD(&value, text.c_str(), PMIX_STRING);
    const pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key.c_str(), &value);
    PMIX_VALUE_DESTRUCT(&value);
    return rc;
  };
  const std::string mine = "all-" + std::to_string(me.rank) + "-" + salt;
  if (put("hyrun.test.all", mine) != PMIX_SUCCESS) return 5;
  for (unsigned peer = 0; peer < size; ++peer)
    if (put("hyrun.test.to." + std::to_string(peer), std::to_string(me.rank) + "->" + std::to_string(peer)) !=
        PMIX_SUCCESS)
      return 5;
  if (PMIx_Commit() != PMIX_SUCCESS) return 5;
  pmix_info_t collect;
  bool yes = true;
  PMIX_INFO_LOAD(&collect, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
  pmix_proc_t all;
  PMIX_LOAD_PROCID(&all, me.nspace, PMIX_RANK_WILDCARD);
  if (const pmix_status_t rc = PMIx_Fence(&all, 1, &collect, 1); rc != PMIX_SUCCESS) {
    std::printf("pmix-keys: rank %u: PMIx_Fence failed: %s\n", me.rank, PMIx_Error_string(rc));
    return 5;
  }
  for (pmix_rank_t peer = 0; peer < size; ++peer) {
    const auto theirs = get(peer, "hyrun.test.all");
    if (theirs && !theirs->starts_with("all-" + std::to_string(peer) + "-"))
      say_wrong("rank " + std::to_string(peer) + "'s value for all", *theirs, "all-" + std::to_string(peer) + "-...");
    if (peer == me.rank && theirs && *theirs != mine) say_wrong("its own value for all", *theirs, mine);
    expect(peer, ("hyrun.test.to." + std::to_string(me.rank)).c_str(),
           std::to_string(peer) + "->" + std::to_string(me.rank));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || std::atoi(argv[1]) < 1 || std::atoi(argv[2]) < 1) {
    std::printf("usage: pmix-keys-client NODES PER_NODE\n");
    return 2;
  }
  const unsigned nodes = static_cast<unsigned>(std::atoi(argv[1])),
                 per_node = static_cast<unsigned>(std::atoi(argv[2]));
  if (const pmix_status_t rc = PMIx_Init(&me, nullptr, 0); rc != PMIX_SUCCESS) {
    std::printf("pmix-keys: PMIx_Init failed: %s\n", PMIx_Error_string(rc));
    return 5;
  }
  check_layout(nodes, per_node);
  const int failed = exchange(nodes * per_node);
  PMIx_Finalize(nullptr, 0);
  if (failed) return failed;
  if (wrong) return 4;
  std::printf("pmix-keys: rank %u of %u: ok\n", me.rank, nodes * per_node);
  return 0;
}
