#pragma once
// Who is at the other end of a TCP connection on this host: the owner (uid) of the peer's
// socket, as the kernel lists it in /proc/net/tcp and /proc/net/tcp6, the way identd
// answers. Unix sockets have SO_PEERCRED; loopback TCP, which libpmix 4's server listens
// on, has only this.
#include <sys/types.h>

#include <optional>
#include <string>

namespace hyrun::pmix {

/// The uid owning the peer's end of `connected_fd`, when the peer is a socket of this host's
/// network namespace; nullopt when it is not found (another host, or it closed meanwhile).
std::optional<uid_t> local_peer_uid(int connected_fd);

/// The kernel's spelling of an address and port in /proc/net/tcp{,6} ("0100007F:1F90"), from
/// a sockaddr_in or sockaddr_in6. Exposed for the tests.
std::string proc_net_address(const void* sockaddr);

}  // namespace hyrun::pmix
