#pragma once
// Where programs with their own bootstrap (torch.distributed env://, gloo) meet: the
// root node's address and a free TCP port, given to every rank as MASTER_ADDR and
// MASTER_PORT, and the interface each node reaches that address on (GLOO_SOCKET_IFNAME).
#include <string>
#include <vector>

namespace hyrun {

/// One IPv4 address of an interface that is up.
struct InterfaceAddress {
  std::string interface;   ///< "eth0"
  std::string address;     ///< "10.0.0.5"
  int prefix_length = 32;  ///< 24 for a /24 network

  /// "10.0.0.5/24", the form the root's record carries.
  std::string to_string() const;
  /// Parses "10.0.0.5/24" (interface left empty). Throws hyrun::Error naming `text` otherwise.
  static InterfaceAddress parse(const std::string& text);
};

/// This node's IPv4 addresses, loopback excluded, in the order the root prefers them for
/// MASTER_ADDR: interfaces of container and VM bridges (docker*, virbr*, br-*) last.
std::vector<InterfaceAddress> local_ipv4_addresses();

/// A TCP port that is free on this host now (bound to port 0, then closed). Like torchrun's
/// own choice, another process may take it before rank 0 binds it; that is rare, and rank
/// 0's bind then fails loudly. Throws SystemError.
int pick_free_tcp_port();

/// The address to use for MASTER_ADDR from this node and the local interface that reaches it.
struct MasterChoice {
  std::string address;    ///< one of the root's addresses
  std::string interface;  ///< this node's interface on the same network; "" when none is
};

/// The first of the root's addresses (in the root's order) that lies in the network of one
/// of this node's addresses; else the root's first address (a routed network), with no
/// interface. Throws hyrun::Error when the root has no address.
MasterChoice choose_master(const std::vector<InterfaceAddress>& root, const std::vector<InterfaceAddress>& local);

}  // namespace hyrun
