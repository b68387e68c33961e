// A bare PMIx client: connects to the server its environment names (PMIx_Init), says what it
// got, and finalizes. Exit 0 when admitted, 3 when refused. The tests run it with a wrong
// namespace and as another user, which hyrun's server must refuse.
//
//   pmix-bare-client put BYTES: then puts BYTES random bytes (seeded by its rank) under one
//   key, commits, fences with the data collected, and reads every rank's value back, checking
//   its size and every byte. Exit 4 when a value is wrong, 5 when a call fails.
//   pmix-bare-client put-dmodex BYTES: the same with a fence that collects no data, so that
//   each value of another node's rank is got by direct modex; a last fence before it ends.
#include <pmix.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr const char* kKey = "hyrun.test.large-put";

std::vector<char> bytes_of_rank(pmix_rank_t rank, std::size_t size) {
  std::vector<char> bytes(size);
  std::mt19937 random(0x5eed + rank);
  for (auto& b : bytes) b = static_cast<char>(random());
  return bytes;
}

pmix_rank_t my_rank = PMIX_RANK_UNDEF;

int fail(const char* what, pmix_status_t rc) {
  std::printf("pmix-bare-client: rank %u: %s failed: %s\n", my_rank, what, PMIx_Error_string(rc));
  std::fflush(stdout);
  return 5;
}

// Every rank's value of kKey, read back and compared byte by byte.
int put_and_read_back(const pmix_proc_t& me, std::size_t size, bool collect_data) {
  std::vector<char> mine = bytes_of_rank(me.rank, size);
  pmix_value_t value;
  PMIX_VALUE_CONSTRUCT(&value);
  value.type = PMIX_BYTE_OBJECT;
  value.data.bo.bytes = mine.data();
  value.data.bo.size = mine.size();
  if (const pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, kKey, &value); rc != PMIX_SUCCESS) return fail("PMIx_Put", rc);
  if (const pmix_status_t rc = PMIx_Commit(); rc != PMIX_SUCCESS) return fail("PMIx_Commit", rc);
  pmix_info_t collect;
  PMIX_INFO_LOAD(&collect, PMIX_COLLECT_DATA, &collect_data, PMIX_BOOL);
  pmix_proc_t all;
  PMIX_LOAD_PROCID(&all, me.nspace, PMIX_RANK_WILDCARD);
  if (const pmix_status_t rc = PMIx_Fence(&all, 1, &collect, 1); rc != PMIX_SUCCESS) return fail("PMIx_Fence", rc);
  pmix_value_t* job_size = nullptr;
  if (const pmix_status_t rc = PMIx_Get(&all, PMIX_JOB_SIZE, nullptr, 0, &job_size); rc != PMIX_SUCCESS)
    return fail("PMIx_Get of PMIX_JOB_SIZE", rc);
  const pmix_rank_t ranks = job_size->data.uint32;
  PMIX_VALUE_RELEASE(job_size);
  int wrong = 0;
  for (pmix_rank_t r = 0; r < ranks; ++r) {
    pmix_proc_t peer;
    PMIX_LOAD_PROCID(&peer, me.nspace, r);
    pmix_value_t* got = nullptr;
    if (const pmix_status_t rc = PMIx_Get(&peer, kKey, nullptr, 0, &got); rc != PMIX_SUCCESS)
      return fail("PMIx_Get of a peer's value", rc);
    const std::vector<char> expected = bytes_of_rank(r, size);
    if (got->type != PMIX_BYTE_OBJECT || got->data.bo.size != size ||
        std::memcmp(got->data.bo.bytes, expected.data(), size) != 0) {
      std::printf("pmix-bare-client: rank %u: rank %u's value is wrong (%zu bytes)\n", me.rank, r,
                  got->type == PMIX_BYTE_OBJECT ? got->data.bo.size : 0);
      ++wrong;
    }
    PMIX_VALUE_RELEASE(got);
  }
  if (wrong) return 4;
  // As MPI_Finalize does: no node's server (nor its ranks' data) goes before every rank has read.
  if (!collect_data)
    if (const pmix_status_t rc = PMIx_Fence(&all, 1, nullptr, 0); rc != PMIX_SUCCESS)
      return fail("the last PMIx_Fence", rc);
  std::printf("pmix-bare-client: rank %u read every rank's %zu bytes\n", me.rank, size);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 3 ? argv[1] : "";
  const bool put = mode == "put" || mode == "put-dmodex";
  if (argc != 1 && !put) {
    std::printf("usage: pmix-bare-client [put|put-dmodex BYTES]\n");
    return 2;
  }
  pmix_proc_t me;
  const pmix_status_t rc = PMIx_Init(&me, nullptr, 0);
  if (rc != PMIX_SUCCESS) {
    std::printf("pmix-bare-client: refused: %s\n", PMIx_Error_string(rc));
    return 3;
  }
  my_rank = me.rank;
  std::printf("pmix-bare-client: admitted as %s rank %u\n", me.nspace, me.rank);
  std::fflush(stdout);
  const int code = put ? put_and_read_back(me, std::strtoull(argv[2], nullptr, 10), mode == "put") : 0;
  PMIx_Finalize(nullptr, 0);
  return code;
}
