#include "hyrun/common/error.hpp"

#include <cerrno>
#include <cstring>

#include "hyrun/common/descriptor_reserve.hpp"

namespace hyrun {

int exit_code::of_failure_status(int status) {
  const int low = status & 0xff;
  return low == 0 ? kLauncherError : low;
}

namespace {
// Out of descriptors: the reserve goes before the error is built (descriptor_reserve.hpp).
std::string system_message(const std::string& what, int errnum) {
  if (errnum == EMFILE || errnum == ENFILE) release_descriptor_reserve();
  return what + ": " + std::strerror(errnum);
}
}  // namespace

SystemError::SystemError(const std::string& what, int errnum) : Error(system_message(what, errnum)), errnum_(errnum) {}

}  // namespace hyrun
