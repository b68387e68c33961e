#pragma once
// Whether a socket is held by a process of this job: one of this process's descendants (the
// ranks it started and whatever they started; an orphan comes back to hyrun, a subreaper),
// and under which of its children.
// hyrun's PMIx server admits only those: libpmix 4.2.2 takes a handshake that fails half-way
// after it admitted the rank (a client that sends its connect-ack and goes, a credential
// that does not check) down an error path that releases the rank's record twice, after which
// that rank's PMIx_Init hangs; a process of this user outside the job must not reach it.
#include <sys/types.h>

#include <optional>
#include <set>

namespace hyrun::pmix {

/// Who of this process's descendants holds a socket.
struct SocketHolder {
  bool known = true;           ///< false: the kernel does not list a process's children, so none can be found
  std::optional<pid_t> child;  ///< the child of this process whose tree (itself included) holds it
  int looked_at = 0;           ///< the processes whose descriptors were read to find it
};
/// Looks for a descendant of this process that has the socket of inode `inode` open. `known`
/// is false when the kernel does not list a process's children (/proc/PID/task/TID/children
/// needs CONFIG_PROC_CHILDREN). Reads /proc: a descendant whose descriptors this process
/// cannot read (another user's) holds nothing. Looks at every descendant until it finds the
/// holder; the order only decides how soon: the children not in `later` (those under which a
/// connection was admitted before) the oldest first, then those in it; depth first, and below
/// a child the newest first. A rank that connects, or an inner hyrun's helper, is found at once.
SocketHolder find_holder(ino_t inode, const std::set<pid_t>& later = {});

}  // namespace hyrun::pmix
