#include "hyrun/launcher/launch_timings.hpp"

#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

#include "hyrun/process/job_events.hpp"

namespace hyrun {

void LaunchTimings::mark(std::string_view step) {
  if (!enabled_) return;
  const std::chrono::duration<double, std::milli> since = Clock::now() - origin();
  steps_.emplace_back(step, since.count());
}

namespace {

// A CPU clock's reading in microseconds; nullopt when it cannot be read (its process gone).
std::optional<std::uint64_t> clock_us(clockid_t clock) {
  timespec t{};
  if (::clock_gettime(clock, &t) != 0) return std::nullopt;
  return static_cast<std::uint64_t>(t.tv_sec) * 1000000 + static_cast<std::uint64_t>(t.tv_nsec) / 1000;
}

}  // namespace

std::uint64_t own_cpu_us() { return clock_us(CLOCK_PROCESS_CPUTIME_ID).value_or(0); }

std::optional<std::uint64_t> process_cpu_us(pid_t pid) {
  // The process's CPU clock, to the nanosecond and with its ended threads, as this process's
  // own: /proc's utime and stime count clock ticks (10 ms), and a helper's few milliseconds
  // read as 0.
  clockid_t clock{};
  if (::clock_getcpuclockid(pid, &clock) != 0) return std::nullopt;
  return clock_us(clock);
}

std::string LaunchTimings::line() const {
  std::string text = fmt::format("timings on {} (task {} of {}), ms:", host_, task_, tasks_);
  for (std::size_t i = 0; i < steps_.size(); ++i)
    text += fmt::format("{} {} {:.1f}", i == 0 ? "" : ",", steps_[i].first, steps_[i].second);
  if (costs_)
    text += fmt::format(
        "; cost: CPU ms hyrun {:.1f}, helper {:.1f}; node link bytes sent {}, received {}; fences {}, "
        "parts {} bytes",
        static_cast<double>(costs_->cpu_us) / 1000, static_cast<double>(costs_->helper_cpu_us) / 1000,
        costs_->link_sent, costs_->link_received, costs_->fences, costs_->fence_bytes);
  return text;
}

std::string LaunchTimings::summary(const std::map<int, LinkCosts>& costs, int tasks) {
  std::string text = fmt::format("timings of {} nodes ({} told the root)", tasks, costs.size());
  if (costs.empty()) return text;
  // "max 52.1 (task 0), median 40.3" of one field over the nodes.
  const auto spread = [&costs](auto field, double scale, const char* format) {
    std::vector<std::pair<std::uint64_t, int>> values;
    for (const auto& [task, c] : costs) values.emplace_back(field(c), task);
    std::sort(values.begin(), values.end());
    const auto& [max, at] = values.back();
    const auto median = values[(values.size() - 1) / 2].first;
    return fmt::format(fmt::runtime(format), static_cast<double>(max) / scale, at, static_cast<double>(median) / scale);
  };
  const char* ms = "max {:.1f} (task {}), median {:.1f}";
  const char* bytes = "max {:.0f} (task {}), median {:.0f}";
  text += fmt::format(": CPU ms hyrun {}; helper {}; node link bytes sent {}; received {}",
                      spread([](const LinkCosts& c) { return c.cpu_us; }, 1000, ms),
                      spread([](const LinkCosts& c) { return c.helper_cpu_us; }, 1000, ms),
                      spread([](const LinkCosts& c) { return c.link_sent; }, 1, bytes),
                      spread([](const LinkCosts& c) { return c.link_received; }, 1, bytes));
  return text;
}

void LaunchTimings::print() {
  if (!enabled_ || printed_) return;
  printed_ = true;
  job_event_line(line());  // whatever the log level: the user asked for it
}

}  // namespace hyrun
