#include "hyrun/ucx/progress.hpp"

#include <sched.h>
#include <time.h>

namespace hyrun::ucx {

void Progress::operator()(ucp_worker_h worker) {
  if (ucp_worker_progress(worker) != 0) {
    idle_ = 0;
    return;
  }
  if (++idle_ < kYieldAfterIdle) return;
  if (idle_ >= kSleepAfterIdle) {
    timespec pause{0, 200'000};
    nanosleep(&pause, nullptr);
  } else {
    sched_yield();
  }
}

}  // namespace hyrun::ucx
