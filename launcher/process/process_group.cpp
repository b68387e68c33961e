#include "hyrun/process/process_group.hpp"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace hyrun {
namespace {

#ifndef PIDFD_SIGNAL_PROCESS_GROUP
constexpr unsigned kSignalProcessGroup = 1U << 2;  // linux/pidfd.h, Linux 6.9
#else
constexpr unsigned kSignalProcessGroup = PIDFD_SIGNAL_PROCESS_GROUP;
#endif

// Whether this kernel signals groups through pidfds; learnt from the first attempt.
int& group_pidfd_support() {
  static int known = -1;  // -1 unknown, 0 no, 1 yes
  return known;
}

int pidfd_open(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

int pidfd_signal_group(int pidfd, int signal) {
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, signal, nullptr, kSignalProcessGroup));
}

}  // namespace

ProcessGroup::ProcessGroup(pid_t leader) : leader_(leader), may_have_members_(true) {
  if (group_pidfd_support() != 0) {
    const int fd = pidfd_open(leader);
    if (fd >= 0) pidfd_.reset(fd);
    // EMFILE and the like: fall back to the number, which is safe while the leader is unreaped.
  }
}

bool ProcessGroup::signal(int signal) {
  if (!may_have_members_) return false;
  if (pidfd_ && group_pidfd_support() != 0) {
    if (pidfd_signal_group(pidfd_.get(), signal) == 0) {
      group_pidfd_support() = 1;
      return true;
    }
    if (errno == ESRCH) {
      may_have_members_ = false;
      return false;
    }
    if (errno != EINVAL) return true;  // e.g. EPERM for a member that changed its credentials
    group_pidfd_support() = 0;         // an older kernel: the flag is unknown
    pidfd_.reset();
  }
  if (leader_reaped_) {
    recheck();
    if (!may_have_members_) return false;
  }
  if (::kill(-leader_, signal) != 0 && errno == ESRCH) may_have_members_ = false;
  return may_have_members_;
}

void ProcessGroup::on_leader_reaped() {
  leader_reaped_ = true;
  // By number, the group may be signalled only while it is known non-empty: look now.
  // With a pidfd, signal 0 tells the same; an empty group gives its pidfd back, so that
  // ranks that come and go (restarts) do not accumulate descriptors.
  if (!pidfd_) return recheck();
  signal(0);
  if (!may_have_members_) pidfd_.reset();
}

void ProcessGroup::recheck() {
  if (!may_have_members_ || pidfd_ || !leader_reaped_) return;
  if (::kill(-leader_, 0) != 0 && errno == ESRCH) may_have_members_ = false;
}

}  // namespace hyrun
