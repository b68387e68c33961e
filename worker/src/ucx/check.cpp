#include "hyrun/ucx/check.hpp"

#include <fmt/format.h>

#include "hyrun/common/error.hpp"

namespace hyrun::ucx {

void check(ucs_status_t status, const std::string& what) {
  if (status != UCS_OK) throw Error(fmt::format("{}: {}", what, ucs_status_string(status)));
}

}  // namespace hyrun::ucx
