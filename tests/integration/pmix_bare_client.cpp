// A bare PMIx client: connects to the server its environment names (PMIx_Init), says what it
// got, and finalizes. Exit 0 when admitted, 3 when refused. The tests run it with a wrong
// namespace and as another user, which hyrun's server must refuse.
#include <pmix.h>

#include <cstdio>

int main() {
  pmix_proc_t me;
  const pmix_status_t rc = PMIx_Init(&me, nullptr, 0);
  if (rc != PMIX_SUCCESS) {
    std::printf("pmix-bare-client: refused: %s\n", PMIx_Error_string(rc));
    return 3;
  }
  std::printf("pmix-bare-client: admitted as %s rank %u\n", me.nspace, me.rank);
  PMIx_Finalize(nullptr, 0);
  return 0;
}
