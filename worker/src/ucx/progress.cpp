#include "hyrun/ucx/progress.hpp"

#include <poll.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <climits>

namespace hyrun::ucx {

bool Progress::poll(ucp_worker_h worker) {
  if (ucp_worker_progress(worker) != 0) {
    restart();
    return true;
  }
  if (sleeping_) return false;
  if (++idle_ % kYieldEvery != 0) return true;
  // The clock is read only here, once per kYieldEvery idle polls: polls are cheap.
  const auto now = Clock::now();
  if (idle_ == kYieldEvery)
    idle_since_ = now;
  else if (now - idle_since_ >= kSleepAfterIdle)
    sleeping_ = true;
  sched_yield();
  return true;
}

void Progress::sleep() {
  const timespec pause{0, static_cast<long>(std::chrono::nanoseconds(sleep_).count())};
  nanosleep(&pause, nullptr);
  sleep_ = std::min(sleep_ * 2, kLongestSleep);
}

void Progress::operator()(ucp_worker_h worker) {
  if (!poll(worker)) sleep();
}

bool Progress::wait_for_event(ucp_worker_h worker, Clock::time_point until) {
  if (poll(worker)) return false;
  int fd = -1;
  if (ucp_worker_get_efd(worker, &fd) != UCS_OK) {
    sleep();
    return false;
  }
  // Armed (UCS_OK): nothing is pending, and the next event makes the fd readable. BUSY:
  // events came in since the last poll; the next poll takes them.
  const ucs_status_t armed = ucp_worker_arm(worker);
  if (armed == UCS_ERR_BUSY) {
    sched_yield();  // never a spin, should UCX keep reporting events that progress does not take
    return false;
  }
  if (armed != UCS_OK) {
    sleep();
    return false;
  }
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
  pollfd event{fd, POLLIN, 0};
  (void)::poll(&event, 1, static_cast<int>(std::clamp<decltype(left)>(left, 0, INT_MAX)));
  return true;
}

}  // namespace hyrun::ucx
