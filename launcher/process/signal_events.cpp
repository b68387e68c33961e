#include "hyrun/process/signal_events.hpp"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>

#include "hyrun/common/error.hpp"

namespace hyrun {

SignalEvents::SignalEvents(std::initializer_list<int> signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int s : signals) sigaddset(&set, s);
  if (sigprocmask(SIG_BLOCK, &set, &previous_mask_) != 0) throw SystemError("blocking signals", errno);
  const int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    sigprocmask(SIG_SETMASK, &previous_mask_, nullptr);
    throw SystemError("creating a signalfd", err);
  }
  fd_.reset(fd);
}

SignalEvents::~SignalEvents() {
  // What is still queued was meant for the loop (or is why hyrun is ending): consumed here,
  // so that unblocking does not deliver it with its default action, killing hyrun before
  // main reports the error and returns the exit code.
  drain();
  sigprocmask(SIG_SETMASK, &previous_mask_, nullptr);
}

std::vector<int> SignalEvents::drain() {
  std::vector<int> out;
  signalfd_siginfo info;
  for (;;) {
    const ssize_t n = ::read(fd_.get(), &info, sizeof info);
    if (n == static_cast<ssize_t>(sizeof info)) {
      out.push_back(static_cast<int>(info.ssi_signo));
      if (info.ssi_signo < kSlots) senders_[info.ssi_signo] = static_cast<pid_t>(info.ssi_pid);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;  // EAGAIN: nothing more pending
  }
  return out;
}

std::optional<int> SignalEvents::pending_stop() const {
  sigset_t pending;
  if (sigpending(&pending) != 0) return std::nullopt;
  for (int s : {SIGTERM, SIGINT, SIGHUP})
    if (sigismember(&pending, s) == 1) return s;
  return std::nullopt;
}

}  // namespace hyrun
