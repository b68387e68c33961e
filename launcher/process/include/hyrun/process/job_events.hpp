#pragma once
// Job events are what a user reads to learn why a job ended ("hyrun: rank 5 (pid 1234) was
// killed by signal 9 (SIGKILL); stopping 7 other ranks"). They are always printed, one
// line each on stderr, independent of the diagnostic log level. In hybrid mode they name
// the node: "hyrun[n3]: ...".
#include <fmt/format.h>

#include <functional>
#include <string>

#include "hyrun/process/own_stderr.hpp"

namespace hyrun {

/// "" in local mode; the node's name in hybrid mode.
inline std::string& job_event_origin() {
  static std::string origin;
  return origin;
}

/// Where lines go: the rank supervisor's stderr queue while its loop runs, in order with the
/// ranks' lines; otherwise OwnStderr. Neither blocks on a stalled reader.
inline std::function<void(const std::string&)>& job_event_sink() {
  static std::function<void(const std::string&)> sink;
  return sink;
}

inline void job_event_line(const std::string& text) {
  const auto& origin = job_event_origin();
  const std::string line =
      origin.empty() ? fmt::format("hyrun: {}\n", text) : fmt::format("hyrun[{}]: {}\n", origin, text);
  if (const auto& sink = job_event_sink()) return sink(line);
  own_stderr()->write(line);
}

template <typename... Args>
void job_event(fmt::format_string<Args...> format, Args&&... args) {
  job_event_line(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace hyrun
