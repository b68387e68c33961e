// The node link's lines after the hello are sealed (link_seal.hpp): what someone who can
// write into the TCP connection makes up, changes, replays, reorders or reflects is refused.
#include "hyrun/link/link_seal.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace hyrun {
namespace {

constexpr const char* kToken = "0123456789abcdef0123456789abcdef";
using Direction = LinkSeal::Direction;

std::string random_body(std::mt19937& random) {
  std::string body = "lost " + std::to_string(random() % 100) + " node-" + std::to_string(random() % 100) + " ";
  body.append(random() % 60, static_cast<char>(' ' + random() % 95));
  return body;
}

TEST(LinkSeal, EveryLineOpensOnceInOrderAtTheOtherEnd) {
  std::mt19937 random(std::random_device{}());
  const std::string nonce = new_link_nonce();
  ASSERT_EQ(nonce.size(), 32u);
  EXPECT_NE(nonce, new_link_nonce());
  LinkSeal sender(kToken, 3, nonce, Direction::kToRoot), receiver(kToken, 3, nonce, Direction::kToRoot);
  for (int i = 0; i < 200; ++i) {
    const std::string body = random_body(random);
    const auto opened = receiver.open(sender.seal(body));
    ASSERT_TRUE(opened) << body;
    EXPECT_EQ(*opened, body);
  }
}

TEST(LinkSeal, AMadeUpChangedReplayedOrReorderedLineIsRefused) {
  std::mt19937 random(std::random_device{}());
  const std::string nonce = new_link_nonce();
  LinkSeal sender(kToken, 1, nonce, Direction::kFromRoot), receiver(kToken, 1, nonce, Direction::kFromRoot);
  EXPECT_FALSE(receiver.open("bye")) << "an unsealed line";
  EXPECT_FALSE(receiver.open("00000000000000000000000000000000 1 bye")) << "a made-up seal";
  const std::string first = sender.seal("alive"), second = sender.seal("bye");
  EXPECT_FALSE(receiver.open(second)) << "out of order";
  for (int i = 0; i < 20; ++i) {  // one character changed anywhere
    std::string changed = first;
    const std::size_t at = random() % changed.size();
    changed[at] = changed[at] == 'a' ? 'b' : 'a';
    EXPECT_FALSE(receiver.open(changed)) << changed;
  }
  ASSERT_TRUE(receiver.open(first));
  EXPECT_FALSE(receiver.open(first)) << "a replay";
  ASSERT_TRUE(receiver.open(second));
}

TEST(LinkSeal, ALineOfAnotherSessionDirectionTaskOrJobIsRefused) {
  const std::string nonce = new_link_nonce();
  const std::string line = LinkSeal(kToken, 1, nonce, Direction::kToRoot).seal("bye");
  EXPECT_TRUE(LinkSeal(kToken, 1, nonce, Direction::kToRoot).open(line));
  EXPECT_FALSE(LinkSeal(kToken, 1, nonce, Direction::kFromRoot).open(line)) << "reflected back to its sender";
  EXPECT_FALSE(LinkSeal(kToken, 1, new_link_nonce(), Direction::kToRoot).open(line)) << "another connection";
  EXPECT_FALSE(LinkSeal(kToken, 2, nonce, Direction::kToRoot).open(line)) << "another node";
  EXPECT_FALSE(LinkSeal("ffffffffffffffffffffffffffffffff", 1, nonce, Direction::kToRoot).open(line)) << "another job";
}

TEST(LinkSeal, TheHelloProofHoldsForItsTokenTaskAndNonceOnly) {
  const std::string nonce = new_link_nonce();
  const std::string proof = link_hello_proof(kToken, 2, 0, nonce);
  EXPECT_EQ(proof, link_hello_proof(kToken, 2, 0, nonce));
  EXPECT_NE(proof, link_hello_proof(kToken, 3, 0, nonce));
  EXPECT_NE(proof, link_hello_proof(kToken, 2, 1, nonce));  // the same hello to another hyrun
  EXPECT_NE(proof, link_hello_proof(kToken, 2, 0, nonce, LinkPurpose::kDirectModex));  // for another purpose
  EXPECT_EQ(link_hello_proof(kToken, 2, 3, nonce, LinkPurpose::kDirectModex),
            link_hello_proof(kToken, 2, 3, nonce, LinkPurpose::kDirectModex));
  EXPECT_NE(proof, link_hello_proof(kToken, 2, 0, new_link_nonce()));
  EXPECT_NE(proof, link_hello_proof("ffffffffffffffffffffffffffffffff", 2, 0, nonce));
}

}  // namespace
}  // namespace hyrun
