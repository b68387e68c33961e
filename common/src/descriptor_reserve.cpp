#include "hyrun/common/descriptor_reserve.hpp"

#include <fcntl.h>

#include <array>

#include "hyrun/common/unique_fd.hpp"

namespace hyrun {
namespace {

std::array<UniqueFd, 2>& reserve() {
  static std::array<UniqueFd, 2> fds;
  return fds;
}

}  // namespace

void hold_descriptor_reserve() {
  for (auto& fd : reserve())
    if (!fd) fd = UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
}

void release_descriptor_reserve() noexcept {
  for (auto& fd : reserve()) fd.reset();
}

}  // namespace hyrun
