// The node link's lines with fields: a line that is not exactly the protocol is refused,
// never read as another task's (an overflowing number, a number with letters after it).
#include "hyrun/launcher/node_link_lines.hpp"

#include <gtest/gtest.h>

#include <string>

namespace hyrun {
namespace {

const std::string kNonce = "00112233445566778899aabbccddeeff";

TEST(NodeLinkLines, HelloGivesTaskNonceAndProof) {
  const auto hello = parse_link_hello("hyrun-link v2 3 " + kNonce + " 0a1b2c");
  ASSERT_TRUE(hello);
  EXPECT_EQ(hello->task, 3);
  EXPECT_EQ(hello->nonce, kNonce);
  EXPECT_EQ(hello->proof, "0a1b2c");
}

TEST(NodeLinkLines, HelloWithATaskOverflowingIntIsRefused) {
  // 2^32 + 1 read as an int by sscanf's %d became task 1 on glibc.
  EXPECT_FALSE(parse_link_hello("hyrun-link v2 4294967297 " + kNonce + " 0a1b2c"));
  EXPECT_FALSE(parse_link_hello("hyrun-link v2 99999999999999999999 " + kNonce + " 0a1b2c"));
}

TEST(NodeLinkLines, HelloWithGarbageIsRefused) {
  const std::string n = " " + kNonce;
  EXPECT_FALSE(parse_link_hello("hyrun-link v2 3x" + n + " 0a1b2c"));
  EXPECT_FALSE(parse_link_hello("hyrun-link v2 3" + n + " 0a1b2c extra"));
  EXPECT_FALSE(parse_link_hello("hyrun-link v2 -3" + n + " 0a1b2c"));
  EXPECT_FALSE(parse_link_hello("hyrun-link v2 +3" + n + " 0a1b2c"));
  EXPECT_FALSE(parse_link_hello("hyrun-link v2 3" + n));
  EXPECT_FALSE(parse_link_hello("hyrun-link v2 3" + n + " "));
  EXPECT_FALSE(parse_link_hello("hyrun-link v2 3 0a1b2c"));  // no nonce
  EXPECT_FALSE(parse_link_hello("hyrun-link v2 3 " + kNonce.substr(1) + "g 0a1b2c"));
  EXPECT_FALSE(parse_link_hello("hyrun-link v2 3 " + kNonce + "0 0a1b2c"));
  EXPECT_FALSE(parse_link_hello("hyrun-link v1 3" + n + " 0a1b2c"));  // the old protocol
  EXPECT_FALSE(parse_link_hello("hyrun-link v2 3" + n + " " + std::string(129, 'a')));
  EXPECT_TRUE(parse_link_hello("hyrun-link v2 3" + n + " " + std::string(128, 'a')));
}

TEST(NodeLinkLines, LossGivesTaskHostAndWhy) {
  const auto loss = parse_link_loss("lost 2 node-b connection closed");
  ASSERT_TRUE(loss);
  EXPECT_EQ(loss->task, 2);
  EXPECT_EQ(loss->host, "node-b");
  EXPECT_EQ(loss->why, "connection closed");
  const auto bare = parse_link_loss("lost 2 node-b ");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->why, "");
}

TEST(NodeLinkLines, LossWithATaskOverflowingIntIsRefused) {
  // 2^32 + 2 read by %d named task 2 as lost.
  EXPECT_FALSE(parse_link_loss("lost 4294967298 node-b connection closed"));
}

TEST(NodeLinkLines, LossWithGarbageIsRefused) {
  // "2x" was read as task 2 on host "x", with the host taken into the reason.
  EXPECT_FALSE(parse_link_loss("lost 2x node-b connection closed"));
  EXPECT_FALSE(parse_link_loss("lost -2 node-b connection closed"));
  EXPECT_FALSE(parse_link_loss("lost 2"));
  EXPECT_FALSE(parse_link_loss("lost  2 node-b why"));
  EXPECT_FALSE(parse_link_loss("lost 2 " + std::string(129, 'h') + " why"));
  EXPECT_FALSE(parse_link_loss("alive"));
}

}  // namespace
}  // namespace hyrun
