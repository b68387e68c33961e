// The node link's protocol (link_message.hpp): every kind round-trips; a line that is not
// exactly its kind is refused, never read as another task's (an overflowing number, a number
// with letters after it); the docs' table says what the code holds.
#include "hyrun/link/link_message.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace hyrun {
namespace {

const std::string kNonce = "00112233445566778899aabbccddeeff";

TEST(LinkMessage, HelloGivesTaskNonceAndProof) {
  const auto hello = parse_link<LinkHello>("hyrun-link v7 3 " + kNonce + " 0a1b2c");
  ASSERT_TRUE(hello);
  EXPECT_EQ(hello->task, 3);
  EXPECT_EQ(hello->nonce, kNonce);
  EXPECT_EQ(hello->proof, "0a1b2c");
}

TEST(LinkMessage, HelloWithATaskOverflowingIntIsRefused) {
  // 2^32 + 1 read as an int by sscanf's %d became task 1 on glibc.
  EXPECT_FALSE(parse_link<LinkHello>("hyrun-link v7 4294967297 " + kNonce + " 0a1b2c"));
  EXPECT_FALSE(parse_link<LinkHello>("hyrun-link v7 99999999999999999999 " + kNonce + " 0a1b2c"));
}

TEST(LinkMessage, HelloWithGarbageIsRefused) {
  const std::string n = " " + kNonce;
  EXPECT_FALSE(parse_link<LinkHello>("hyrun-link v7 3x" + n + " 0a1b2c"));
  EXPECT_FALSE(parse_link<LinkHello>("hyrun-link v7 3" + n + " 0a1b2c extra"));
  EXPECT_FALSE(parse_link<LinkHello>("hyrun-link v7 -3" + n + " 0a1b2c"));
  EXPECT_FALSE(parse_link<LinkHello>("hyrun-link v7 +3" + n + " 0a1b2c"));
  EXPECT_FALSE(parse_link<LinkHello>("hyrun-link v7 3" + n));
  EXPECT_FALSE(parse_link<LinkHello>("hyrun-link v7 3" + n + " "));
  EXPECT_FALSE(parse_link<LinkHello>("hyrun-link v7 3 0a1b2c"));  // no nonce
  EXPECT_FALSE(parse_link<LinkHello>("hyrun-link v7 3 " + kNonce.substr(1) + "g 0a1b2c"));
  EXPECT_FALSE(parse_link<LinkHello>("hyrun-link v7 3 " + kNonce + "0 0a1b2c"));
  EXPECT_FALSE(parse_link<LinkHello>("hyrun-link v1 3" + n + " 0a1b2c"));  // the old protocol
  EXPECT_FALSE(parse_link<LinkHello>("hyrun-link v7 3" + n + " " + std::string(129, 'a')));
  EXPECT_TRUE(parse_link<LinkHello>("hyrun-link v7 3" + n + " " + std::string(128, 'a')));
}

TEST(LinkMessage, LossGivesTaskReporterHostAndWhy) {
  const auto loss = parse_link<LinkLoss>("lost 2 5 node-b connection closed");
  ASSERT_TRUE(loss);
  EXPECT_EQ(loss->task, 2);
  EXPECT_EQ(loss->reporter, 5);
  EXPECT_EQ(loss->host, "node-b");
  EXPECT_EQ(loss->why, "connection closed");
  const auto bare = parse_link<LinkLoss>("lost 2 0 node-b ");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->why, "");
}

TEST(LinkMessage, LossWithATaskOverflowingIntIsRefused) {
  // 2^32 + 2 read by %d named task 2 as lost.
  EXPECT_FALSE(parse_link<LinkLoss>("lost 4294967298 1 node-b connection closed"));
  EXPECT_FALSE(parse_link<LinkLoss>("lost 2 4294967297 node-b connection closed"));
}

TEST(LinkMessage, LossWithGarbageIsRefused) {
  // "2x" was read as task 2 on host "x", with the host taken into the reason.
  EXPECT_FALSE(parse_link<LinkLoss>("lost 2x 1 node-b connection closed"));
  EXPECT_FALSE(parse_link<LinkLoss>("lost -2 1 node-b connection closed"));
  EXPECT_FALSE(parse_link<LinkLoss>("lost 2 -1 node-b connection closed"));
  EXPECT_FALSE(parse_link<LinkLoss>("lost 2 node-b connection closed"));  // no reporter (v5's line)
  EXPECT_FALSE(parse_link<LinkLoss>("lost 2"));
  EXPECT_FALSE(parse_link<LinkLoss>("lost 2 1"));
  EXPECT_FALSE(parse_link<LinkLoss>("lost  2 1 node-b why"));
  EXPECT_FALSE(parse_link<LinkLoss>("lost 2 1 " + std::string(129, 'h') + " why"));
  EXPECT_FALSE(parse_link<LinkLoss>("alive"));
}

}  // namespace
}  // namespace hyrun

namespace hyrun {
namespace {

std::string random_bytes(std::mt19937& random, std::size_t n) {
  std::string bytes(n, '\0');
  for (auto& b : bytes) b = static_cast<char>(random());
  return bytes;
}

// Every kind, with random fields (empty data, the largest numbers, bytes of every value):
// its parser reads back exactly what its formatter wrote, and no other kind's parser takes it.
template <class M>
void expect_round_trip(const M& message) {
  const std::string text = format_link(message);
  const auto back = parse_link<M>(text);
  ASSERT_TRUE(back) << text.substr(0, 80);
  EXPECT_TRUE(*back == message) << text.substr(0, 80);
  ASSERT_EQ(link_kind_of(text), M::kKind) << text.substr(0, 80);
  EXPECT_EQ(parse_link<LinkAlive>(text).has_value(), M::kKind == LinkKind::kAlive);
  EXPECT_EQ(parse_link<LinkBye>(text).has_value(), M::kKind == LinkKind::kBye);
  EXPECT_EQ(parse_link<LinkLoss>(text).has_value(), M::kKind == LinkKind::kLost);
  EXPECT_EQ(parse_link<LinkFencePart>(text).has_value(), M::kKind == LinkKind::kFence);
  EXPECT_EQ(parse_link<LinkFenceWhole>(text).has_value(), M::kKind == LinkKind::kFenced);
  EXPECT_EQ(parse_link<LinkDmodexGet>(text).has_value(), M::kKind == LinkKind::kDmodexGet);
  EXPECT_EQ(parse_link<LinkDmodexData>(text).has_value(), M::kKind == LinkKind::kDmodexData);
  EXPECT_EQ(parse_link<LinkDmodexNone>(text).has_value(), M::kKind == LinkKind::kDmodexNone);
  EXPECT_EQ(parse_link<LinkFenceFailed>(text).has_value(), M::kKind == LinkKind::kFenceFailed);
  EXPECT_EQ(parse_link<LinkMore>(text).has_value(), M::kKind == LinkKind::kMore);
  EXPECT_EQ(parse_link<LinkCosts>(text).has_value(), M::kKind == LinkKind::kCosts);
  EXPECT_EQ(parse_link<LinkEnded>(text).has_value(), M::kKind == LinkKind::kEnded);
}

TEST(LinkMessage, EveryKindRoundTripsAndNoOtherKindsParserTakesIt) {
  std::mt19937 random(36);
  std::uniform_int_distribution<std::uint64_t> u64;
  std::uniform_int_distribution<std::uint32_t> u32;
  for (int trial = 0; trial < 200; ++trial) {
    const std::uint64_t big = trial == 0 ? ~std::uint64_t{0} : u64(random);
    const std::size_t n = trial == 1 ? 0 : random() % 300;
    expect_round_trip(LinkAlive{});
    expect_round_trip(LinkBye{});
    expect_round_trip(LinkLoss{static_cast<int>(u32(random) >> 1), static_cast<int>(u32(random) >> 1),
                               fmt::format("node-{}", trial),
                               trial % 3 == 0 ? "" : "silent for 30 s (--node-timeout)"});
    expect_round_trip(LinkFencePart{big, random_bytes(random, n)});
    expect_round_trip(LinkFenceWhole{big, random_bytes(random, n)});
    expect_round_trip(LinkDmodexGet{big, trial == 0 ? ~std::uint32_t{0} : u32(random)});
    expect_round_trip(LinkDmodexData{big, random_bytes(random, n)});
    expect_round_trip(LinkDmodexNone{big});
    expect_round_trip(LinkFenceFailed{big, std::string(1 + random() % kLinkMaxWhy, 'w')});
    expect_round_trip(LinkMore{random_bytes(random, 1 + n)});
    expect_round_trip(LinkCosts{static_cast<int>(u32(random) >> 1), big, u64(random), u64(random), u64(random),
                                u32(random), u64(random)});
    expect_round_trip(LinkEnded{trial == 0 ? std::numeric_limits<int>::max() : static_cast<int>(u32(random) >> 1)});
    const LinkHello hello{static_cast<int>(u32(random) >> 1), kNonce, std::string(1 + random() % 128, 'a')};
    const auto back = parse_link<LinkHello>(format_link(hello));
    ASSERT_TRUE(back);
    EXPECT_TRUE(*back == hello);
  }
}

TEST(LinkMessage, FieldsOutsideTheirKindsAreRefused) {
  for (const std::string& body :
       std::initializer_list<std::string>{"alive ",
                                          "alive 1",
                                          "bye now",
                                          "fence",
                                          "fence 1",
                                          "fence x 00",
                                          "fence 1 0",
                                          "fence 1 0g",
                                          "fence -1 00",
                                          "fence 18446744073709551616 00",
                                          "fenced 1",
                                          "dmodex-get 1",
                                          "dmodex-get 1 4294967296",
                                          "dmodex-get 1 2 3",
                                          "dmodex-data 1",
                                          "dmodex-data 1 abc",
                                          "dmodex-none",
                                          "dmodex-none 1 2",
                                          "dmodex-none x",
                                          "lost",
                                          "lost 1",
                                          "lost 1 2",
                                          "fence-failed 1",
                                          "fence-failed 1 ",
                                          "fence-failed x why",
                                          "fence-failed 1 " + std::string(kLinkMaxWhy + 1, 'w'),
                                          "more",
                                          "more ",
                                          "more 0",
                                          "more 0g",
                                          "costs",
                                          "costs 1 2 3 4 5 6",  // no task (v5's line)
                                          "costs 0 1 2 3 4 5 6 7",
                                          "costs 0 1 2 3 4 5 -6",
                                          "costs -1 1 2 3 4 5 6",
                                          "costs 4294967296 1 2 3 4 5 6",
                                          "costs 0 1 2 3 4 5 18446744073709551616",
                                          "costs 0 1 2 3 4 5 6 ",
                                          "costs 0 1  2 3 4 5 6",
                                          "ended",
                                          "ended ",
                                          "ended -1",
                                          "ended 2147483648",
                                          "ended 1 2",
                                          "ended 1 ",
                                          "ended x"}) {
    const auto kind = link_kind_of(body);
    ASSERT_TRUE(kind) << body;
    EXPECT_FALSE(parse_link<LinkAlive>(body) || parse_link<LinkBye>(body) || parse_link<LinkLoss>(body) ||
                 parse_link<LinkFencePart>(body) || parse_link<LinkFenceWhole>(body) ||
                 parse_link<LinkDmodexGet>(body) || parse_link<LinkDmodexData>(body) ||
                 parse_link<LinkDmodexNone>(body) || parse_link<LinkFenceFailed>(body) || parse_link<LinkMore>(body) ||
                 parse_link<LinkCosts>(body) || parse_link<LinkEnded>(body))
        << body;
  }
  EXPECT_FALSE(link_kind_of("status 1"));
  EXPECT_FALSE(link_kind_of("fences 1 00"));
  EXPECT_FALSE(link_kind_of(""));
}

// docs/architecture.md's table of the node link's lines lists exactly the hello and the kinds
// of link_kinds(), in its order, each with who sends it.
// Bytes of any length become lines of at most a piece each, whose pieces and last line give
// back every byte in order; data that fits one piece is one line of its own kind.
TEST(LinkMessage, BytesGoInPiecesNoLineLongerThanTheLimit) {
  std::mt19937 random(37);
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, kLinkPieceBytes - 1, kLinkPieceBytes, kLinkPieceBytes + 1,
                              3 * kLinkPieceBytes + 17}) {
    const LinkFenceWhole whole{42, random_bytes(random, n)};
    const auto bodies = format_link_pieces(whole);
    ASSERT_EQ(bodies.size(), n == 0 ? 1 : (n + kLinkPieceBytes - 1) / kLinkPieceBytes) << n;
    std::string back;
    for (std::size_t i = 0; i + 1 < bodies.size(); ++i) {
      const auto more = parse_link<LinkMore>(bodies[i]);
      ASSERT_TRUE(more) << n << ": piece " << i;
      EXPECT_EQ(more->data.size(), kLinkPieceBytes);
      back += more->data;
    }
    const auto last = parse_link<LinkFenceWhole>(bodies.back());
    ASSERT_TRUE(last) << n;
    EXPECT_EQ(last->number, 42u);
    back += last->data;
    EXPECT_TRUE(back == whole.data) << n;
    for (const auto& body : bodies) EXPECT_LE(body.size() + 64, kLinkMaxLine) << n;  // with its seal
  }
}

TEST(LinkMessage, TheArchitectureDocsTableListsEveryKindInOrder) {
  std::ifstream doc(std::string(HYRUN_SOURCE_DIR) + "/docs/architecture.md");
  ASSERT_TRUE(doc) << "docs/architecture.md";
  std::vector<std::pair<std::string, std::string>> rows;  // (first word of the message, from)
  bool in_section = false, in_table = false;
  for (std::string line; std::getline(doc, line);) {
    if (line.starts_with("## ")) in_section = line == "## The node link (hybrid mode)";
    if (!in_section) continue;
    if (line.starts_with("| message | from |")) {
      in_table = true;
      continue;
    }
    if (!in_table || line.starts_with("| ---")) continue;
    if (!line.starts_with("| `")) break;
    const auto word_end = line.find_first_of(" `", 3);
    const auto from_start = line.find("| ", line.find('`', 3)) + 2;
    rows.emplace_back(line.substr(3, word_end - 3), line.substr(from_start, line.find(" |", from_start) - from_start));
  }
  std::vector<std::pair<std::string, std::string>> expected{{"hyrun-link", "a node, first"}};
  for (const auto& k : link_kinds()) expected.emplace_back(std::string(k.word), std::string(k.from));
  ASSERT_EQ(rows.size(), expected.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].first, expected[i].first) << "row " << i;
    EXPECT_TRUE(rows[i].second.starts_with(expected[i].second))
        << "row " << i << ": '" << rows[i].second << "' should start with '" << expected[i].second << "'";
  }
}

}  // namespace
}  // namespace hyrun
