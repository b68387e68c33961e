#include "bootstrap_messages.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "hyrun/common/error.hpp"
#include "random_bytes.hpp"

namespace hyrun::bootstrap {
namespace {

using test_support::random_bytes;

ProcessIdentity random_process(std::mt19937& gen) {
  ProcessIdentity p;
  const auto boot = random_bytes(gen, p.boot_id.size());
  std::copy(boot.begin(), boot.end(), p.boot_id.begin());
  p.pid_namespace = (uint64_t{gen()} << 32) | gen();
  p.pid = 1 + gen() % 4000000;
  p.start_ticks = (uint64_t{gen()} << 32) | gen();
  return p;
}

TEST(BootstrapMessages, JoinRoundTrips) {
  std::mt19937 gen(std::random_device{}());
  const JoinRequest join{42, 5, random_bytes(gen, 187), random_process(gen)};
  const auto decoded = decode_join(encode(join));
  EXPECT_EQ(decoded.rank, 42);
  EXPECT_EQ(decoded.node, 5);
  EXPECT_EQ(decoded.address, join.address);
  EXPECT_EQ(decoded.process, join.process);
  EXPECT_TRUE(decoded.process.known());
}

TEST(BootstrapMessages, TableRoundTrips) {
  std::mt19937 gen(std::random_device{}());
  std::vector<Peer> table;
  // Every third rank has no process yet (unknown identity).
  for (int r = 0; r < 9; ++r)
    table.push_back({r / 2, random_bytes(gen, 50 + gen() % 170), r % 3 == 2 ? ProcessIdentity{} : random_process(gen)});
  const auto decoded = decode_table(encode_table(table));
  EXPECT_EQ(decoded, table);
  for (int r = 0; r < 9; ++r) EXPECT_EQ(decoded[r].process.known(), r % 3 != 2) << r;
}

TEST(BootstrapMessages, AProcessIdentityOfAnotherSizeIsAnError) {
  std::mt19937 gen(std::random_device{}());
  auto bytes = encode(JoinRequest{1, 0, random_bytes(gen, 64), random_process(gen)});
  // The identity is the last blob: its length word, then its bytes. Claim one byte fewer.
  const std::size_t length_at = bytes.size() - ProcessIdentity::kBytes - 4;
  bytes[length_at] = static_cast<std::byte>(ProcessIdentity::kBytes - 1);
  bytes.pop_back();
  EXPECT_THROW(decode_join(bytes), Error);
}

TEST(BootstrapMessages, TruncatedOrPaddedMessagesAreErrors) {
  std::mt19937 gen(std::random_device{}());
  const auto bytes = encode(JoinRequest{1, 0, random_bytes(gen, 64), random_process(gen)});
  for (std::size_t cut = 0; cut < bytes.size(); ++cut)
    EXPECT_THROW(decode_join(std::span(bytes).first(cut)), Error) << cut;
  auto padded = bytes;
  padded.push_back(std::byte{0});
  EXPECT_THROW(decode_join(padded), Error);
  const std::vector<std::byte> huge_count{std::byte{0xff}, std::byte{0xff}, std::byte{0xff}, std::byte{0x7f}};
  EXPECT_THROW(decode_table(huge_count), Error);
}

TEST(BootstrapMessages, OversizedMessagesAreErrors) {
  std::mt19937 gen(std::random_device{}());
  EXPECT_THROW(decode_join(encode(JoinRequest{1, 0, random_bytes(gen, kMaxAddressBytes + 1), random_process(gen)})),
               Error);
  EXPECT_NO_THROW(decode_join(encode(JoinRequest{1, 0, random_bytes(gen, kMaxAddressBytes), random_process(gen)})));
  EXPECT_THROW(decode_join(encode(JoinRequest{1, 0, {}, {}})), Error);
  EXPECT_THROW(decode_table(encode_table({{0, random_bytes(gen, kMaxAddressBytes + 1), {}}})), Error);
  const auto table = encode_table(
      {{0, random_bytes(gen, kMaxAddressBytes), random_process(gen)}, {1, random_bytes(gen, 10), random_process(gen)}});
  EXPECT_LE(table.size(), max_table_bytes(2));
}

TEST(BootstrapMessages, BundleRoundTripsEveryJoinByteForByte) {
  std::mt19937 gen(std::random_device{}());
  std::vector<std::vector<std::byte>> joins;
  for (int i = 0; i < 9; ++i) joins.push_back(random_bytes(gen, 1 + gen() % 700));
  joins.push_back(random_bytes(gen, kMaxSealedJoinBytes));
  EXPECT_EQ(decode_bundle(encode_bundle(joins), joins.size()), joins);
  EXPECT_LE(encode_bundle(joins).size(), max_bundle_bytes(joins.size()));
}

TEST(BootstrapMessages, ABundleOfNoJoinsTooManyOrTooLargeOnesOrCutIsAnError) {
  std::mt19937 gen(std::random_device{}());
  EXPECT_THROW(decode_bundle(encode_bundle({}), 4), Error);
  const std::vector<std::vector<std::byte>> three{random_bytes(gen, 40), random_bytes(gen, 50), random_bytes(gen, 60)};
  EXPECT_THROW(decode_bundle(encode_bundle(three), 2), Error);
  EXPECT_NO_THROW(decode_bundle(encode_bundle(three), 3));
  EXPECT_THROW(decode_bundle(encode_bundle({random_bytes(gen, kMaxSealedJoinBytes + 1)}), 4), Error);
  const auto bytes = encode_bundle(three);
  for (std::size_t cut = 0; cut < bytes.size(); ++cut)
    EXPECT_THROW(decode_bundle(std::span(bytes).first(cut), 3), Error) << cut;
  auto padded = bytes;
  padded.push_back(std::byte{0});
  EXPECT_THROW(decode_bundle(padded, 3), Error);
}

}  // namespace
}  // namespace hyrun::bootstrap
