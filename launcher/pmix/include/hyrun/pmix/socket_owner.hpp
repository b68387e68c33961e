#pragma once
// Who is at the other end of a TCP connection on this host: the owner (uid) of the peer's
// socket, as the kernel's socket diagnostics (NETLINK_SOCK_DIAG, what `ss` reads) say for
// the connection's exact 4-tuple: one lookup, whatever the number of sockets. Unix sockets
// have SO_PEERCRED; loopback TCP, which libpmix 4's server listens on, has only this.
#include <sys/types.h>

#include <optional>

namespace hyrun::pmix {

/// The peer's end of a connection: its owner and its socket's inode (never 0).
struct PeerSocket {
  uid_t uid = 0;
  ino_t inode = 0;
};
/// The peer's end of `connected_fd`, when that end is a live socket of this host's network
/// namespace: established, and held by a process (an inode). nullopt otherwise: another host,
/// a socket its owner closed already (the kernel then lists it with uid 0 and no inode: not
/// root's), or the lookup failing.
std::optional<PeerSocket> local_peer(int connected_fd);
/// Its owner alone.
std::optional<uid_t> local_peer_uid(int connected_fd);

}  // namespace hyrun::pmix
