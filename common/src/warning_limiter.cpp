#include "hyrun/common/warning_limiter.hpp"

#include <spdlog/spdlog.h>

#include <utility>

namespace hyrun {

WarningLimiter::WarningLimiter(std::string what, int burst, Clock::duration period)
    : what_(std::move(what)), burst_(burst), period_(period), left_(burst) {}

void WarningLimiter::warn(const std::string& message, Clock::time_point now) {
  flush(now);
  if (left_ > 0) {
    --left_;
    spdlog::warn("{}", message);
    if (left_ == 0) window_end_ = now + period_;
    return;
  }
  ++held_back_;
}

void WarningLimiter::flush(Clock::time_point now) {
  if (left_ > 0 || now < window_end_) return;
  if (held_back_ == 0) {
    left_ = burst_;  // a quiet period: the next ones go out one by one again
    return;
  }
  spdlog::warn("{} more {} in the last {} s (not logged one by one)", held_back_, what_,
               std::chrono::duration_cast<std::chrono::seconds>(period_).count());
  held_back_ = 0;
  window_end_ = now + period_;
}

}  // namespace hyrun
