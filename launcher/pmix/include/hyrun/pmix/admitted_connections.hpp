#pragma once
// The connections hyrun's accept(2) handed to libpmix's listener (accept_filter.cpp), kept
// until their handshake is judged. libpmix 4.2.2 never completes a rank's PMIx_Init when a
// handshake for that rank failed after it took the rank's record (a process of the job that
// forged one, docs/pmix.md): the rank would wait for ever. So each admitted connection is
// kept with the child of hyrun's whose process tree holds its peer, and the rank supervisor
// names a rank whose connection is still open but whose handshake never completed. And a
// rank that ended is judged once libpmix has read its connection to the end (its finalize).
// Process-wide (accept(2) is a free function): written on libpmix's listener thread, read on
// hyrun's.
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <set>

namespace hyrun::pmix {

/// One connection libpmix took, not yet judged.
struct AdmittedConnection {
  int fd = -1;
  ino_t inode = 0;  ///< its socket's: a closed descriptor's number is reused
  std::chrono::steady_clock::time_point admitted;
  std::optional<pid_t> child;  ///< the child of hyrun's whose tree holds its peer
};

/// Records `fd`, just accepted for libpmix, its peer held under `child`.
void remember_admitted(int fd, std::optional<pid_t> child);
/// Whether `fd` is a connection that was admitted, judged or not, and still the same socket.
bool is_admitted(int fd);
/// Whether libpmix still holds a connection admitted under `child` (judged or not): it has not
/// read that connection to its end, so what the peer said last (its PMIx_Finalize) may still
/// be unread, though the peer has ended. libpmix closes a client's connection only after it
/// handled every message before the close, in order.
bool any_held_under(pid_t child);
/// The children of hyrun's under which a connection was admitted (held or not): the door looks
/// at them last, since a process of the job connects once (a rank, an inner hyrun's helper).
std::set<pid_t> children_admitted();
/// Whether any admitted connection waits to be judged.
bool any_admitted_unjudged();
/// Calls `judge` for each admitted connection that libpmix still holds and drops those it
/// returns true for (judged: its handshake completed, or it is no rank's); those libpmix
/// closed are dropped unjudged.
void judge_admitted(const std::function<bool(const AdmittedConnection&)>& judge);

}  // namespace hyrun::pmix
