#pragma once
// Something besides the ranks that lives in the rank supervisor's poll loop (the link among
// the hyrun processes of a job): the supervisor polls its descriptors, wakes it in time and
// tells it what happened, without knowing what it is.
#include <poll.h>
#include <sys/types.h>

#include <chrono>
#include <vector>

namespace hyrun {

class PollParticipant {
 public:
  virtual ~PollParticipant() = default;
  /// Appends the descriptors to watch now.
  virtual void add_poll_fds(std::vector<pollfd>& fds) = 0;
  /// Handles `p` if it is one of this participant's descriptors; returns whether it was.
  virtual bool on_poll(const pollfd& p) = 0;
  /// When the loop must wake at the latest for on_tick (a heartbeat, a silence limit).
  virtual std::chrono::steady_clock::time_point wake_by() const = 0;
  /// Called after every wake of the loop: timers due now.
  virtual void on_tick() = 0;
  /// Called before the supervisor judges a rank's end: take in now what the rank said
  /// before it ended, though its descriptor was not polled yet.
  virtual void settle() {}
  /// Whether this participant may not yet have read all that the ended process `pid` (a rank
  /// process) sent it: its descriptor for the process is open in a thread the loop does not
  /// run (libpmix's). The rank's verdict waits for it, bounded, when it would be a failure.
  virtual bool still_reading(pid_t /*pid*/) const { return false; }
};

/// A participant with no timers: it only answers its descriptors (the PMIx and PMI servers).
class UntimedParticipant : public PollParticipant {
 public:
  std::chrono::steady_clock::time_point wake_by() const override {
    return std::chrono::steady_clock::time_point::max();
  }
  void on_tick() override {}
};

}  // namespace hyrun
