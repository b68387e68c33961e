#include "hyrun/pmix/socket_owner.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

namespace hyrun::pmix {
namespace {

// /proc/net/tcp prints each 32-bit word of an address as the host reads it from memory.
std::string words_of(const void* address, std::size_t bytes) {
  std::string out;
  for (std::size_t i = 0; i < bytes; i += 4) {
    std::uint32_t word = 0;
    std::memcpy(&word, static_cast<const char*>(address) + i, 4);
    out += fmt::format("{:08X}", word);
  }
  return out;
}

// The uid column of the line of `table` whose local and remote addresses are these.
std::optional<uid_t> owner_in(const char* table, const std::string& local, const std::string& remote) {
  std::ifstream in(table);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, local_address, remote_address, state, queues, timer, retransmits;
    long uid = -1;
    if (!(fields >> slot >> local_address >> remote_address >> state >> queues >> timer >> retransmits >> uid))
      continue;
    if (local_address == local && remote_address == remote && uid >= 0) return static_cast<uid_t>(uid);
  }
  return std::nullopt;
}

}  // namespace

std::string proc_net_address(const void* sockaddr) {
  sa_family_t family = 0;
  std::memcpy(&family, sockaddr, sizeof family);
  if (family == AF_INET) {
    sockaddr_in a{};
    std::memcpy(&a, sockaddr, sizeof a);
    return fmt::format("{}:{:04X}", words_of(&a.sin_addr, 4), ntohs(a.sin_port));
  }
  sockaddr_in6 a{};
  std::memcpy(&a, sockaddr, sizeof a);
  return fmt::format("{}:{:04X}", words_of(&a.sin6_addr, 16), ntohs(a.sin6_port));
}

std::optional<uid_t> local_peer_uid(int connected_fd) {
  sockaddr_storage mine{}, peer{};
  socklen_t mine_length = sizeof mine, peer_length = sizeof peer;
  if (::getsockname(connected_fd, reinterpret_cast<sockaddr*>(&mine), &mine_length) != 0 ||
      ::getpeername(connected_fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0)
    return std::nullopt;
  if (mine.ss_family != AF_INET && mine.ss_family != AF_INET6) return std::nullopt;
  // The peer's socket: its local address is our remote one, and the other way round.
  return owner_in(mine.ss_family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6", proc_net_address(&peer),
                  proc_net_address(&mine));
}

}  // namespace hyrun::pmix
