#include "hyrun/launcher/launch_timings.hpp"

#include <fmt/format.h>

#include "hyrun/process/job_events.hpp"

namespace hyrun {

void LaunchTimings::mark(std::string_view step) {
  if (!enabled_) return;
  const std::chrono::duration<double, std::milli> since = Clock::now() - origin();
  steps_.emplace_back(step, since.count());
}

std::string LaunchTimings::line() const {
  std::string text = fmt::format("timings on {} (task {} of {}), ms:", host_, task_, tasks_);
  for (std::size_t i = 0; i < steps_.size(); ++i)
    text += fmt::format("{} {} {:.1f}", i == 0 ? "" : ",", steps_[i].first, steps_[i].second);
  return text;
}

void LaunchTimings::print() {
  if (!enabled_ || printed_) return;
  printed_ = true;
  job_event_line(line());  // whatever the log level: the user asked for it
}

}  // namespace hyrun
