#include "hyrun/pmix/socket_owner.hpp"

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <array>
#include <cstring>

#include "hyrun/common/unique_fd.hpp"

namespace hyrun::pmix {
namespace {

struct DiagRequest {
  nlmsghdr header;
  inet_diag_req_v2 request;
};

// The address of a sockaddr_in or sockaddr_in6 in inet_diag's form (network order words).
void load_address(const sockaddr_storage& from, __be32 (&to)[4], __be16& port) {
  if (from.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(from);
    std::memcpy(&to[0], &a.sin_addr, 4);
    port = a.sin_port;
  } else {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(from);
    std::memcpy(&to[0], &a.sin6_addr, 16);
    port = a.sin6_port;
  }
}

}  // namespace

std::optional<PeerSocket> local_peer(int connected_fd) {
  sockaddr_storage mine{}, peer{};
  socklen_t mine_length = sizeof mine, peer_length = sizeof peer;
  if (::getsockname(connected_fd, reinterpret_cast<sockaddr*>(&mine), &mine_length) != 0 ||
      ::getpeername(connected_fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0)
    return std::nullopt;
  if (mine.ss_family != AF_INET && mine.ss_family != AF_INET6) return std::nullopt;
  UniqueFd diag(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (!diag) return std::nullopt;
  const timeval limit{1, 0};  // the kernel answers at once; never block libpmix's accept longer
  ::setsockopt(diag.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  // The peer's socket, by its exact 4-tuple: its local address and port are our remote ones.
  DiagRequest q{};
  q.header.nlmsg_len = sizeof q;
  q.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  q.header.nlmsg_flags = NLM_F_REQUEST;
  q.request.sdiag_family = static_cast<__u8>(mine.ss_family);
  q.request.sdiag_protocol = IPPROTO_TCP;
  q.request.idiag_states = ~0u;  // any state: it is checked below
  load_address(peer, q.request.id.idiag_src, q.request.id.idiag_sport);
  load_address(mine, q.request.id.idiag_dst, q.request.id.idiag_dport);
  q.request.id.idiag_cookie[0] = q.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(diag.get(), &q, sizeof q, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) !=
      static_cast<ssize_t>(sizeof q))
    return std::nullopt;
  alignas(nlmsghdr) std::array<char, 8192> reply;
  const ssize_t n = ::recv(diag.get(), reply.data(), reply.size(), 0);
  if (n < static_cast<ssize_t>(sizeof(nlmsghdr))) return std::nullopt;
  const auto* header = reinterpret_cast<const nlmsghdr*>(reply.data());
  // One socket or an error (ENOENT: no such socket here).
  if (!NLMSG_OK(header, static_cast<unsigned>(n)) || header->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
      header->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg)))
    return std::nullopt;
  const auto* socket = static_cast<const inet_diag_msg*>(NLMSG_DATA(header));
  // An orphan (its owner closed it: FIN_WAIT, TIME_WAIT) is listed with uid 0 and no inode.
  if (socket->idiag_state != TCP_ESTABLISHED || socket->idiag_inode == 0) return std::nullopt;
  return PeerSocket{static_cast<uid_t>(socket->idiag_uid), static_cast<ino_t>(socket->idiag_inode)};
}

std::optional<uid_t> local_peer_uid(int connected_fd) {
  const auto peer = local_peer(connected_fd);
  return peer ? std::optional(peer->uid) : std::nullopt;
}

}  // namespace hyrun::pmix
