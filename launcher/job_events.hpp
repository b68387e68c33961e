#pragma once
// Job events are what a user reads to learn why a job ended ("hyrun: rank 5 (pid 1234) was
// killed by signal 9 (SIGKILL); stopping 7 other ranks"). They are always printed, one
// line each on stderr, independent of the diagnostic log level.
#include <fmt/format.h>

#include <cstdio>

namespace hyrun {

template <typename... Args>
void job_event(fmt::format_string<Args...> format, Args&&... args) {
  const std::string line = fmt::format("hyrun: {}\n", fmt::format(format, std::forward<Args>(args)...));
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace hyrun
