#include "hyrun/ucx/progress.hpp"

#include <sched.h>
#include <time.h>

#include <algorithm>

namespace hyrun::ucx {

void Progress::operator()(ucp_worker_h worker) {
  if (ucp_worker_progress(worker) != 0) {
    restart();
    return;
  }
  if (sleeping_) {
    const timespec pause{0, static_cast<long>(std::chrono::nanoseconds(sleep_).count())};
    nanosleep(&pause, nullptr);
    sleep_ = std::min(sleep_ * 2, kLongestSleep);
    return;
  }
  if (++idle_ % kYieldEvery != 0) return;
  // The clock is read only here, once per kYieldEvery idle polls: polls are cheap.
  const auto now = Clock::now();
  if (idle_ == kYieldEvery)
    idle_since_ = now;
  else if (now - idle_since_ >= kSleepAfterIdle)
    sleeping_ = true;
  sched_yield();
}

}  // namespace hyrun::ucx
