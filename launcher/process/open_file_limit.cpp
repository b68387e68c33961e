#include "hyrun/process/open_file_limit.hpp"

#include <fmt/format.h>

#include "hyrun/common/descriptor_reserve.hpp"

namespace hyrun {
namespace {
rlimit& original() {
  static rlimit limit = [] {
    rlimit l{};
    if (getrlimit(RLIMIT_NOFILE, &l) != 0) l.rlim_cur = l.rlim_max = RLIM_INFINITY;
    return l;
  }();
  return limit;
}

}  // namespace

void raise_open_file_limit() {
  rlimit raised = original();
  if (raised.rlim_cur != raised.rlim_max) {
    raised.rlim_cur = raised.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &raised);
  }
  hold_descriptor_reserve();
}

rlim_t original_open_file_soft_limit() { return original().rlim_cur; }

std::string describe_fd_exhaustion(int global_rank) {
  rlimit now{};
  getrlimit(RLIMIT_NOFILE, &now);
  return fmt::format(
      "out of file descriptors starting rank {}: hyrun holds 5 per rank and its limit is {} (the hard limit of "
      "'ulimit -n'); raise it (ulimit -Hn, limits.conf, or Slurm's PropagateResourceLimits) or start fewer ranks per hyrun",
      global_rank, now.rlim_cur == RLIM_INFINITY ? std::string("unlimited") : std::to_string(now.rlim_cur));
}

}  // namespace hyrun
