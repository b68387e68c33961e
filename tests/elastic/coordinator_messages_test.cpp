// The coordinator's typed messages: what one rank encodes the other decodes unchanged, and
// a malformed message is refused with an error naming the message and the field.
#include <gtest/gtest.h>

#include <string>

#include "coordinator_link.hpp"
#include "coordinator_messages.hpp"
#include "hyrun/common/error.hpp"

namespace hyrun::ep::elastic {
namespace {

/// The message of the Error that decoding `text` as an M throws ("" when none).
template <class M>
std::string error_of(const std::string& text) {
  try {
    decode<M>(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CoordinatorMessages, EveryMessageArrivesAsSent) {
  const auto phase =
      decode<msg::Phase>(encode(msg::Phase{7, {{0, 0, "ab", 0, "cd", ""}, {5, 2, "0123", 3, "4567", "89ab"}}}));
  EXPECT_EQ(phase.global_phase, 7u);
  ASSERT_EQ(phase.peers.size(), 2u);
  EXPECT_EQ(phase.peers[1].rank, 5);
  EXPECT_EQ(phase.peers[1].incarnation, 2);
  EXPECT_EQ(phase.peers[1].address, "0123");
  EXPECT_EQ(phase.peers[1].world_node, 3);
  EXPECT_EQ(phase.peers[1].descriptor, "4567");
  EXPECT_EQ(phase.peers[1].process, "89ab");
  EXPECT_EQ(phase.peers[0].process, "");

  const auto reg = decode<msg::Register>(encode(msg::Register{3, "beef"}));
  EXPECT_EQ(reg.incarnation, 3);
  EXPECT_EQ(reg.descriptor, "beef");

  const auto failed = decode<msg::Failed>(encode(msg::Failed{{2, 6}, 1.5, 12}));
  EXPECT_EQ(failed.ranks, (std::vector<int>{2, 6}));
  EXPECT_DOUBLE_EQ(failed.detect_ms, 1.5);
  EXPECT_EQ(failed.iteration, 12);

  const uint64_t epoch = (uint64_t{3} << 32) + (uint64_t{1} << 24);  // beyond 32 bits
  const auto resume = decode<msg::Resume>(encode(msg::Resume{{6}, epoch, 13}));
  EXPECT_EQ(resume.ranks, std::vector<int>{6});
  EXPECT_EQ(resume.epoch, epoch);
  EXPECT_EQ(resume.iteration, 13);

  msg::Result full{
      "node-a",       3, {6}, report::BandwidthStats{10, 20, 15, 30}, report::SplitBandwidth{1, 2, 3, 4}, 0.25,
      "row 3 differs"};
  const auto result = decode<msg::Result>(encode(full));
  EXPECT_EQ(result.node, "node-a");
  EXPECT_EQ(result.local_rank, 3);
  EXPECT_EQ(result.detected, std::vector<int>{6});
  ASSERT_TRUE(result.bandwidth);
  EXPECT_DOUBLE_EQ(result.bandwidth->gbps, 10);
  EXPECT_DOUBLE_EQ(result.bandwidth->avg_us, 20);
  EXPECT_DOUBLE_EQ(result.bandwidth->min_us, 15);
  EXPECT_DOUBLE_EQ(result.bandwidth->max_us, 30);
  ASSERT_TRUE(result.split);
  EXPECT_DOUBLE_EQ(result.split->dispatch_gbps, 1);
  EXPECT_DOUBLE_EQ(result.split->dispatch_avg_us, 2);
  EXPECT_DOUBLE_EQ(result.split->combine_gbps, 3);
  EXPECT_DOUBLE_EQ(result.split->combine_avg_us, 4);
  EXPECT_EQ(result.detect_ms, 0.25);
  EXPECT_EQ(result.validation_problem, "row 3 differs");

  const auto bare = decode<msg::Result>(encode(msg::Result{"n", 0, {}, {}, {}, {}, {}}));
  EXPECT_FALSE(bare.bandwidth);
  EXPECT_FALSE(bare.split);
  EXPECT_FALSE(bare.detect_ms);
  EXPECT_FALSE(bare.validation_problem);

  decode<msg::Done>(encode(msg::Done{}));
  decode<msg::Free>(encode(msg::Free{}));
}

TEST(CoordinatorMessages, TextThatIsNoMessageIsRefused) {
  EXPECT_EQ(error_of<msg::Go>("{\"type\": \"go\""), "a coordinator message that is not JSON");
  EXPECT_EQ(error_of<msg::Go>("[1,2]"), "a coordinator message that is not a JSON object: [1,2]");
  EXPECT_EQ(error_of<msg::Go>("{\"kind\": \"go\"}"),
            "a coordinator message without a string 'type': {\"kind\":\"go\"}");
  EXPECT_EQ(error_of<msg::Go>("{\"type\": 3}"), "a coordinator message without a string 'type': {\"type\":3}");
}

TEST(CoordinatorMessages, AnotherTypeThanExpectedIsNamed) {
  EXPECT_EQ(error_of<msg::Ready>(encode(msg::Done{})), "expected a 'ready' message, got 'done': {\"type\":\"done\"}");
}

TEST(CoordinatorMessages, AMissingFieldIsNamed) {
  EXPECT_EQ(error_of<msg::Failed>(R"({"type": "failed", "ranks": [2], "detect_ms": 1.0})"),
            "'failed' message: field 'iteration' is missing; expected an integer");
  EXPECT_EQ(error_of<msg::Result>(R"({"type": "result", "node": "a", "local_rank": 0, "detected": [],
                                      "bandwidth": {"gbps": 1, "avg_us": 2, "min_us": 3}})"),
            "'result' message: field 'bandwidth.max_us' is missing; expected a number");
}

TEST(CoordinatorMessages, AFieldOfTheWrongKindIsNamedWithWhatItHolds) {
  EXPECT_EQ(error_of<msg::Register>(R"({"type": "register", "incarnation": "1", "descriptor": "ab"})"),
            "'register' message: field 'incarnation' is \"1\"; expected an integer");
  EXPECT_EQ(error_of<msg::Register>(R"({"type": "register", "incarnation": 1, "descriptor": 5})"),
            "'register' message: field 'descriptor' is 5; expected a string");
  EXPECT_EQ(error_of<msg::Register>(R"({"type": "register", "incarnation": 4294967296, "descriptor": "ab"})"),
            "'register' message: field 'incarnation' is 4294967296; expected an integer that fits an int");
  EXPECT_EQ(error_of<msg::Failed>(R"({"type": "failed", "ranks": [2, -1], "detect_ms": 1, "iteration": 0})"),
            "'failed' message: field 'ranks' is [2,-1]; expected a list of ranks (integers, 0 or more)");
  EXPECT_EQ(error_of<msg::Failed>(R"({"type": "failed", "ranks": 2, "detect_ms": 1, "iteration": 0})"),
            "'failed' message: field 'ranks' is 2; expected a list of ranks");
  EXPECT_EQ(error_of<msg::Resume>(R"({"type": "resume", "ranks": [], "epoch": -1, "iteration": 0})"),
            "'resume' message: field 'epoch' is -1; expected an unsigned integer");
  EXPECT_EQ(error_of<msg::Phase>(R"({"type": "phase", "global_phase": 0, "peers": [{"rank": 0, "incarnation": 0,
                                     "address": "", "world_node": 0, "descriptor": "ab", "process": ""}, {"rank": -3,
                                     "incarnation": 0, "address": "", "world_node": 0, "descriptor": "ab",
                                     "process": ""}]})"),
            "'phase' message: field 'peers[1].rank' is -3; expected a rank (0 or more)");
  EXPECT_EQ(error_of<msg::Phase>(R"({"type": "phase", "global_phase": 0, "peers": [7]})"),
            "'phase' message: field 'peers[0]' is 7; expected an object");
  EXPECT_EQ(error_of<msg::Result>(R"({"type": "result", "node": "a", "local_rank": 0, "detected": [],
                                      "bandwidth": [1, 2, 3, 4]})"),
            "'result' message: field 'bandwidth' is [1,2,3,4]; expected an object");
}

}  // namespace
}  // namespace hyrun::ep::elastic
