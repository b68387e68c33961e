#pragma once
// The one progress policy of every UCX wait in hyrun (World's messages, endpoint closes,
// the EP transport's flushes and signal waits).
#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdint>

namespace hyrun::ucx {

/// Progresses a worker while waiting, and gives the CPU away while nothing happens: ranks
/// often outnumber cores (many ranks per GPU node, CI machines), and a waiter that only
/// spins takes the core from the very peer it waits for.
///  - every kYieldEvery-th poll in a row that made no progress yields the CPU (the polls
///    between keep short gaps, data in flight, fast);
///  - once nothing has happened for kSleepAfterIdle, every idle poll sleeps, 200 us at
///    first, twice as long each time up to kLongestSleep (sched_yield gives other processes
///    almost nothing while several waiters spin: a Slurm step starting on the same cores
///    waited seconds behind three idle ranks; and 63 ranks each waking every 200 us took
///    both cores of a 16-node test bed from rank 0, whose address table they waited for,
///    past the 60 s bootstrap limit).
/// A wait that only the worker's events can end (a message) blocks on the worker's event fd
/// instead of sleeping (wait_for_event): an idle rank then wakes when its message comes, not
/// every 200 us (two such ranks, restarted for a later phase, slowed the other ranks'
/// dispatch + combine 50 times on their shared cores: issue 20).
/// A poll that made progress, or restart(), starts over.
class Progress {
 public:
  using Clock = std::chrono::steady_clock;

  void operator()(ucp_worker_h worker);
  /// One poll like operator(), but past kSleepAfterIdle it blocks until the worker has an
  /// event (or ucp_worker_signal, or `until`) instead of sleeping. True when it blocked:
  /// the caller then checks what no event reports (its deadline, hyrun's death notices).
  /// Needs a context with UCP_FEATURE_WAKEUP (ucx::make_context); sleeps without it.
  bool wait_for_event(ucp_worker_h worker, Clock::time_point until);
  /// Starts over: the caller begins a new wait, or saw progress that UCX cannot see
  /// (stores into memory mapped from a peer).
  void restart() noexcept {
    idle_ = 0;
    sleeping_ = false;
    sleep_ = kFirstSleep;
  }

 private:
  /// The EP benchmark measured 64 (docs/performance.md): yielding at every idle poll was
  /// no faster over shm, and 8 ranks over tcp then stalled more often.
  static constexpr uint64_t kYieldEvery = 64;
  /// Waits for data in flight end long before; past this, the peer is busy elsewhere.
  static constexpr std::chrono::milliseconds kSleepAfterIdle{20};
  /// The first and the longest sleep of an idle poll: a waiter idle this long already
  /// notices its data at most kLongestSleep late, and 64 idle waiters take a few percent
  /// of one core instead of all of two.
  static constexpr std::chrono::microseconds kFirstSleep{200};
  static constexpr std::chrono::microseconds kLongestSleep{2000};
  /// One poll: false once nothing has happened for kSleepAfterIdle (the caller pauses).
  bool poll(ucp_worker_h worker);
  /// The pause of an idle poll: sleep_, then twice as long next time (up to kLongestSleep).
  void sleep();
  uint64_t idle_ = 0;
  Clock::time_point idle_since_{};
  bool sleeping_ = false;
  std::chrono::microseconds sleep_{kFirstSleep};
};

}  // namespace hyrun::ucx
