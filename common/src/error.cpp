#include "hyrun/common/error.hpp"

#include <cstring>

namespace hyrun {

int exit_code::of_failure_status(int status) {
  const int low = status & 0xff;
  return low == 0 ? kLauncherError : low;
}

SystemError::SystemError(const std::string& what, int errnum)
    : Error(what + ": " + std::strerror(errnum)), errnum_(errnum) {}

}  // namespace hyrun
