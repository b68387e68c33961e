#pragma once
// The process group of one rank, signalled only while it is known to be this rank's.
//
// Why: a rank's pid is its process group id, and once hyrun reaps the rank the number can
// be reused by an unrelated process that makes its own group with it; kill(-pid) would
// then hit that group. A pidfd taken while the rank is our unreaped child names the
// group by the kernel's pid object, not by number: signalling through it (Linux >= 6.9,
// PIDFD_SIGNAL_PROCESS_GROUP) reaches this group's members or nobody, never a group made
// later with the same number. On older kernels the group is signalled by number only
// while that is safe: the leader is unreaped, or the group still had members when it was
// reaped and no reap of ours has since seen it empty.
#include <sys/types.h>

#include "hyrun/process/unique_fd.hpp"

namespace hyrun {

class ProcessGroup {
 public:
  ProcessGroup() = default;
  /// `leader` must be an unreaped child of this process that leads its own group.
  explicit ProcessGroup(pid_t leader);

  /// Sends `signal` to every member still in the group. Returns false when the group is
  /// known to be empty (then it is never signalled again).
  bool signal(int signal);
  /// Call right after the leader was reaped (waitpid returned its exit).
  void on_leader_reaped();
  /// Call after reaping any other process: a group emptied since is forgotten.
  void recheck();
  bool may_have_members() const { return may_have_members_; }

 private:
  pid_t leader_ = 0;
  UniqueFd pidfd_;
  bool leader_reaped_ = false;
  bool may_have_members_ = false;
};

}  // namespace hyrun
