#include "hyrun/common/error.hpp"

#include <cstring>

namespace hyrun {

SystemError::SystemError(const std::string& what, int errnum)
    : Error(what + ": " + std::strerror(errnum)), errnum_(errnum) {}

}  // namespace hyrun
