// The in-process fabric's transports keep the Transport contract for peers that come and go
// (transport.hpp), as UcxTransport does (ucx_transport_test.cpp): a detached peer is not
// written to and flush() names it; attaching it again by its descriptor makes it a target
// again; a descriptor of another rank, or a peer out of range, is refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "hyrun/common/error.hpp"
#include "hyrun/ep/transport.hpp"

namespace hyrun::ep {
namespace {

TEST(EpInProcessTransport, ADetachedPeerIsNotWrittenUntilAttachedAgain) {
  for (const auto writes : {InProcessFabric::Writes::kMapped, InProcessFabric::Writes::kPutOnly}) {
    InProcessFabric fabric(3, 64, writes);
    Transport& t0 = fabric.transport(0);
    std::mt19937_64 random(std::random_device{}());
    std::vector<uint64_t> data(4);
    for (auto& v : data) v = random();

    t0.detach_peer(2);
    EXPECT_EQ(t0.mapped(2, 0, 8), nullptr);
    t0.put(2, 0, data.data(), 32);
    t0.put(1, 0, data.data(), 32);  // a peer still attached is written
    try {
      t0.flush();
      FAIL() << "expected PeerFailureError";
    } catch (const PeerFailureError& e) {
      EXPECT_EQ(e.ranks(), std::vector<int>{2});
    }
    EXPECT_EQ(std::memcmp(fabric.region(1).data(), data.data(), 32), 0);
    for (std::byte b : fabric.region(2)) ASSERT_EQ(b, std::byte{0}) << "a detached peer's region was written";
    EXPECT_FALSE(t0.known_failed(2)) << "detached is not dead";

    t0.attach_peer(2, fabric.transport(2).local_descriptor());
    t0.put(2, 8, data.data(), 32);
    t0.signal(2, 56, 5);
    t0.flush();
    EXPECT_EQ(std::memcmp(fabric.region(2).data() + 8, data.data(), 32), 0);
    uint64_t signal = 0;
    std::memcpy(&signal, fabric.region(2).data() + 56, 8);
    EXPECT_EQ(signal, 5u);
  }
}

TEST(EpInProcessTransport, ADescriptorOfAnotherRankOrABadPeerIsRefused) {
  InProcessFabric fabric(3, 64);
  Transport& t0 = fabric.transport(0);
  EXPECT_THROW(t0.attach_peer(2, fabric.transport(1).local_descriptor()), UsageError);
  EXPECT_THROW(t0.attach_peer(2, {}), UsageError);
  EXPECT_THROW(t0.attach_peer(3, fabric.transport(2).local_descriptor()), UsageError);
  EXPECT_THROW(t0.detach_peer(0), UsageError);
  EXPECT_THROW(t0.detach_peer(-1), UsageError);
  t0.attach_peer(0, t0.local_descriptor());  // itself: nothing to do
}

}  // namespace
}  // namespace hyrun::ep
