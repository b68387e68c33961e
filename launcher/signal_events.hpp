#pragma once
// Signals as events on a file descriptor (signalfd), so the launcher's one poll loop
// handles child exits and user signals without async handlers. Construction blocks the
// signals in this process; destruction restores the previous mask.
#include <signal.h>

#include <initializer_list>
#include <optional>
#include <vector>

#include "launcher/unique_fd.hpp"

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
  /// A signal that asks the job to end (SIGINT, SIGTERM, SIGHUP) waiting to be drained, if
  /// any; it stays queued. For work outside the poll loop that must still honour signals.
  std::optional<int> pending_stop() const;

 private:
  sigset_t previous_mask_{};
  UniqueFd fd_;
};

}  // namespace hyrun
