#include "hyrun/launcher/master_endpoint.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <memory>

#include <fmt/format.h>

#include "hyrun/common/error.hpp"
#include "hyrun/process/unique_fd.hpp"

namespace hyrun {
namespace {

std::uint32_t to_host_order(const std::string& address) {
  in_addr a{};
  if (inet_pton(AF_INET, address.c_str(), &a) != 1) throw Error(fmt::format("'{}' is not an IPv4 address", address));
  return ntohl(a.s_addr);
}

std::uint32_t mask_of(int prefix_length) {
  return prefix_length <= 0 ? 0u : prefix_length >= 32 ? 0xffffffffu : ~((1u << (32 - prefix_length)) - 1u);
}

bool is_bridge(const std::string& name) {
  return name.starts_with("docker") || name.starts_with("virbr") || name.starts_with("br-");
}

}  // namespace

std::string InterfaceAddress::to_string() const { return fmt::format("{}/{}", address, prefix_length); }

InterfaceAddress InterfaceAddress::parse(const std::string& text) {
  const auto slash = text.find('/');
  InterfaceAddress a;
  a.address = text.substr(0, slash);
  int prefix = -1;
  if (slash != std::string::npos) {
    const char* begin = text.data() + slash + 1;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(begin, end, prefix);
    if (ec != std::errc{} || ptr != end) prefix = -1;
  }
  in_addr ignored{};
  if (prefix < 0 || prefix > 32 || inet_pton(AF_INET, a.address.c_str(), &ignored) != 1)
    throw Error(fmt::format("'{}' is not an IPv4 address with a prefix length (e.g. 10.0.0.5/24)", text));
  a.prefix_length = prefix;
  return a;
}

std::vector<InterfaceAddress> local_ipv4_addresses() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) throw SystemError("getifaddrs", errno);
  const std::unique_ptr<ifaddrs, decltype(&freeifaddrs)> owner(list, &freeifaddrs);
  std::vector<InterfaceAddress> out;
  for (const ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK))
      continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
    int prefix = 32;
    if (i->ifa_netmask)
      prefix = __builtin_popcount(reinterpret_cast<const sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr);
    out.push_back({i->ifa_name, text, prefix});
  }
  std::stable_partition(out.begin(), out.end(), [](const InterfaceAddress& a) { return !is_bridge(a.interface); });
  return out;
}

int pick_free_tcp_port() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throw SystemError("socket (picking MASTER_PORT)", errno);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = 0;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    throw SystemError("bind (picking MASTER_PORT)", errno);
  socklen_t length = sizeof a;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &length) != 0)
    throw SystemError("getsockname (picking MASTER_PORT)", errno);
  return ntohs(a.sin_port);
}

MasterChoice choose_master(const std::vector<InterfaceAddress>& root, const std::vector<InterfaceAddress>& local) {
  if (root.empty())
    throw Error(
        "the root node has no IPv4 address other than loopback, so MASTER_ADDR cannot be set; set MASTER_ADDR "
        "(and MASTER_PORT) yourself");
  for (const auto& r : root) {
    const std::uint32_t ra = to_host_order(r.address);
    for (const auto& l : local) {
      const std::uint32_t mask = mask_of(std::min(r.prefix_length, l.prefix_length));
      if ((ra & mask) == (to_host_order(l.address) & mask)) return {r.address, l.interface};
    }
  }
  return {root.front().address, ""};
}

}  // namespace hyrun
