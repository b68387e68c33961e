#pragma once
// The one progress policy of every UCX wait in hyrun (World's messages, endpoint closes,
// the EP transport's flushes and signal waits).
#include <ucp/api/ucp.h>

namespace hyrun::ucx {

/// Progresses a worker while waiting. After kYieldAfterIdle polls in a row that made no
/// progress it yields the CPU at every idle poll, and after kSleepAfterIdle it sleeps
/// 200 us at each: ranks often outnumber cores (many ranks per GPU node, CI machines),
/// and a busy-polling waiter would otherwise starve the very peer it waits for. A poll
/// that made progress starts the count again.
class Progress {
 public:
  void operator()(ucp_worker_h worker);
  /// Starts the idle count again: the caller begins a new wait, or saw progress that UCX
  /// cannot see (stores into memory mapped from a peer).
  void restart() noexcept { idle_ = 0; }

 private:
  /// Short gaps (a message in flight) are polled without giving the CPU away.
  static constexpr unsigned kYieldAfterIdle = 32;
  /// sched_yield gives other processes almost nothing while several waiters spin (a
  /// Slurm step starting on the same cores waited seconds behind three idle ranks); waits
  /// of data in flight end long before (this is tens of milliseconds of nothing).
  static constexpr unsigned kSleepAfterIdle = 1u << 15;
  unsigned idle_ = 0;
};

}  // namespace hyrun::ucx
