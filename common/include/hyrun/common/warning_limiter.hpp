#pragma once
// Bounds the warnings that someone outside the job can provoke (refused connections, garbage
// on a port): the first few go out one by one, the rest are counted and summed up at most
// once a period, so that a flood of connections cannot flood the job's log.
#include <chrono>
#include <cstdint>
#include <string>

namespace hyrun {

class WarningLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  /// `what` names the warnings in the summary ("refused connections on the node link").
  explicit WarningLimiter(std::string what, int burst = 10, Clock::duration period = std::chrono::seconds(10));

  /// Logs `message` as a warning when the limit allows it; counts it otherwise.
  void warn(const std::string& message, Clock::time_point now = Clock::now());
  /// Logs the summary of what was held back once its period is over (call it from a tick,
  /// so that the last of a flood is told even when nothing follows it).
  void flush(Clock::time_point now = Clock::now());
  /// How many warnings were held back since the last summary.
  std::uint64_t held_back() const { return held_back_; }

 private:
  std::string what_;
  int burst_;
  Clock::duration period_;
  int left_;  // warnings that may still go out one by one
  std::uint64_t held_back_ = 0;
  Clock::time_point window_end_{};
};

}  // namespace hyrun
