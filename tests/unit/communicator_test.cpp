// Communicator: the order in which a rank answers the lower ranks it connects to after their
// first message (answer_as_they_come, docs/architecture.md "One connection a pair"): as their
// messages come, not in rank order. At the World's start the ranks enter in reverse rank order
// (each makes its endpoints to the ranks above it first), so answering in rank order made the
// highest rank wait for rank 0, the last to enter, before it answered anyone (16 x 8 on the
// testbed: 1.16 of 7ebfc1b's time). Three Communicators of one job in this process: rank 0 (A),
// rank 1 (B) and rank 2 (C), C with no endpoint to either.
#include <gtest/gtest.h>
#include <ucp/api/ucp.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap_messages.hpp"
#include "communicator.hpp"
#include "message_tag.hpp"

namespace hyrun {
namespace {

using namespace std::chrono_literals;
constexpr uint64_t kSeq = 1;

RankEnvironment rank_of_three(int rank) {
  RankEnvironment c;
  c.rank = rank;
  c.world_size = 3;
  c.local_rank = rank;
  c.local_world_size = 3;
  c.num_nodes = 1;
  c.job_token = "0123456789abcdef0123456789abcdef";
  c.bootstrap_timeout_ms = 20000;  // only ends a test that failed
  return c;
}

std::vector<std::byte> address_of(const Communicator& comm) {
  const ucx::WorkerAddress address(comm.worker());
  return {address.bytes().begin(), address.bytes().end()};
}

class StartBarrierOrder : public ::testing::Test {
 protected:
  StartBarrierOrder() : a_(rank_of_three(0), {}), b_(rank_of_three(1), {}), c_(rank_of_three(2), {}) {
    const std::vector<bootstrap::Peer> table{{0, address_of(a_), {}}, {0, address_of(b_), {}}, {0, address_of(c_), {}}};
    for (Communicator* comm : {&a_, &b_, &c_}) comm->connect_endpoints(table);
  }
  // `from`'s contribution to collective kSeq, sent to C, from a thread of its own: the send
  // completes only as C's worker, progressed by the call under test, takes the connection.
  static std::thread contribute(Communicator& from) {
    return std::thread([&from] {
      const auto t = tag::make(tag::Kind::kCollective, from.contract().rank, kSeq);
      const std::vector<std::byte> part{std::byte{0x5a}};
      const auto sealed = from.seal(t, from.id_of(2), part);
      from.wait(from.start_send(2, from.endpoint_to(2), t, sealed, "a contribution"), "a contribution", 2);
    });
  }
  bool waits_in_c(int rank) {
    ucp_tag_recv_info_t info{};
    return ucp_tag_probe_nb(c_.worker(), tag::make(tag::Kind::kCollective, rank, kSeq), tag::kFullMask, 0, &info) !=
           nullptr;
  }

  Communicator a_, b_, c_;
};

TEST_F(StartBarrierOrder, ALowerRankIsAnsweredAsItsMessageComesWhileALowerOneHasNotEntered) {
  ASSERT_TRUE(c_.connects_after_theirs(0));
  ASSERT_TRUE(c_.connects_after_theirs(1));
  std::vector<int> answered;
  std::thread b_side = contribute(b_);
  std::optional<std::thread> a_side;
  // A enters only once C has answered B: in rank order C would still be waiting for A.
  c_.answer_as_they_come(
      kSeq, {0, 1},
      [&](int peer) {
        answered.push_back(peer);
        if (peer == 1) a_side = contribute(a_);
      },
      Communicator::Clock::now() + 10s);
  b_side.join();
  if (a_side) a_side->join();
  EXPECT_EQ(answered, (std::vector<int>{1, 0}));
  // The messages are only looked at: the caller's receive takes and authenticates them.
  EXPECT_TRUE(waits_in_c(0));
  EXPECT_TRUE(waits_in_c(1));
}

TEST_F(StartBarrierOrder, ReturnsAtItsDeadlineForTheCallersReceiveToReport) {
  std::vector<int> answered;
  const auto start = Communicator::Clock::now();
  c_.answer_as_they_come(
      kSeq, {0, 1}, [&](int peer) { answered.push_back(peer); }, start + 200ms);
  EXPECT_TRUE(answered.empty());
  EXPECT_GE(Communicator::Clock::now(), start + 200ms);
}

}  // namespace
}  // namespace hyrun
