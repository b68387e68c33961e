#include "hyrun/pmix/status.hpp"

#include "hyrun/common/error.hpp"

namespace hyrun::pmix {

std::string describe_status(pmix_status_t status) {
  const char* name = PMIx_Error_string(status);
  return std::string(name ? name : "unknown PMIx status") + " (" + std::to_string(status) + ")";
}

void throw_if_failed(pmix_status_t status, const std::string& what) {
  if (status == PMIX_SUCCESS) return;
  const std::string message = what + " failed: " + describe_status(status);
  if (status == PMIX_ERR_TIMEOUT) throw TimeoutError(message);
  throw Error(message);
}

}  // namespace hyrun::pmix
