#pragma once
// Signals as events on a file descriptor (signalfd), so the launcher's one poll loop
// handles child exits and user signals without async handlers. Construction blocks the
// signals in this process; destruction restores the previous mask.
#include <signal.h>
#include <sys/types.h>

#include <initializer_list>
#include <optional>
#include <vector>

#include "hyrun/process/unique_fd.hpp"

namespace hyrun {

class SignalEvents {
 public:
  explicit SignalEvents(std::initializer_list<int> signals);
  ~SignalEvents();
  SignalEvents(const SignalEvents&) = delete;
  SignalEvents& operator=(const SignalEvents&) = delete;

  int fd() const { return fd_.get(); }
  /// Every signal that arrived since the last call (non-blocking).
  std::vector<int> drain();
  /// The pid that sent the latest `signal` drained so far; 0 when none arrived or the
  /// kernel sent it.
  pid_t sender_of(int signal) const { return signal > 0 && signal < kSlots ? senders_[signal] : 0; }

  /// A signal that asks the job to end (SIGINT, SIGTERM, SIGHUP) waiting to be drained, if
  /// any; it stays queued. For work outside the poll loop that must still honour signals.
  std::optional<int> pending_stop() const;

 private:
  static constexpr int kSlots = 65;
  pid_t senders_[kSlots] = {};
  sigset_t previous_mask_{};
  UniqueFd fd_;
};

}  // namespace hyrun
