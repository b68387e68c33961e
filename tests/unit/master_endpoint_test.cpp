#include "hyrun/launcher/master_endpoint.hpp"

#include <gtest/gtest.h>

#include "hyrun/common/error.hpp"

namespace hyrun {
namespace {

InterfaceAddress at(const std::string& interface, const std::string& cidr) {
  InterfaceAddress a = InterfaceAddress::parse(cidr);
  a.interface = interface;
  return a;
}

TEST(MasterEndpoint, EachNodeTakesTheRootAddressOnANetworkItShares) {
  // The root has a management network first and a fast network second; a node only on
  // the fast network must get the root's fast address and its own interface there.
  const std::vector<InterfaceAddress> root{at("eth0", "192.168.1.10/24"), at("ib0", "10.20.0.1/16")};
  const auto on_both = choose_master(root, {at("eth0", "192.168.1.11/24"), at("ib0", "10.20.3.4/16")});
  EXPECT_EQ(on_both.address, "192.168.1.10");
  EXPECT_EQ(on_both.interface, "eth0");
  const auto fast_only = choose_master(root, {at("ib0", "10.20.3.4/16")});
  EXPECT_EQ(fast_only.address, "10.20.0.1");
  EXPECT_EQ(fast_only.interface, "ib0");
  const auto root_itself = choose_master(root, root);
  EXPECT_EQ(root_itself.address, "192.168.1.10");
  EXPECT_EQ(root_itself.interface, "eth0");
}

TEST(MasterEndpoint, NoSharedNetworkFallsBackToTheRootsFirstAddressWithoutInterface) {
  const auto routed = choose_master({at("eth0", "192.168.1.10/24")}, {at("eth0", "172.16.0.9/24")});
  EXPECT_EQ(routed.address, "192.168.1.10");
  EXPECT_EQ(routed.interface, "");
  EXPECT_THROW(choose_master({}, {at("eth0", "172.16.0.9/24")}), Error);
}

TEST(MasterEndpoint, AddressesRoundTripAndBadOnesAreNamed) {
  EXPECT_EQ(InterfaceAddress::parse("10.2.3.4/24").to_string(), "10.2.3.4/24");
  for (const char* bad : {"10.2.3.4", "10.2.3.4/33", "10.2.3/24", "host/24", "10.2.3.4/2x"}) {
    try {
      InterfaceAddress::parse(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(MasterEndpoint, LocalAddressesExcludeLoopbackAndPortIsUsable) {
  for (const auto& a : local_ipv4_addresses()) EXPECT_NE(a.address.rfind("127.", 0), 0u) << a.interface;
  const int port = pick_free_tcp_port();
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
}

}  // namespace
}  // namespace hyrun
