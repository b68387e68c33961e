#include "bootstrap_messages.hpp"

#include <gtest/gtest.h>

#include <random>

#include "hyrun/common/error.hpp"
#include "random_bytes.hpp"

namespace hyrun::bootstrap {
namespace {

using test_support::random_bytes;

TEST(BootstrapMessages, JoinRoundTrips) {
  std::mt19937 gen(std::random_device{}());
  const JoinRequest join{42, 5, random_bytes(gen, 187)};
  const auto decoded = decode_join(encode(join));
  EXPECT_EQ(decoded.rank, 42);
  EXPECT_EQ(decoded.node, 5);
  EXPECT_EQ(decoded.address, join.address);
}

TEST(BootstrapMessages, TableRoundTrips) {
  std::mt19937 gen(std::random_device{}());
  std::vector<Peer> table;
  for (int r = 0; r < 9; ++r) table.push_back({r / 2, random_bytes(gen, 50 + gen() % 170)});
  EXPECT_EQ(decode_table(encode_table(table)), table);
}

TEST(BootstrapMessages, TruncatedOrPaddedMessagesAreErrors) {
  std::mt19937 gen(std::random_device{}());
  const auto bytes = encode(JoinRequest{1, 0, random_bytes(gen, 64)});
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
  EXPECT_THROW(decode_join(encode(JoinRequest{1, 0, random_bytes(gen, kMaxAddressBytes + 1)})), Error);
  EXPECT_NO_THROW(decode_join(encode(JoinRequest{1, 0, random_bytes(gen, kMaxAddressBytes)})));
  EXPECT_THROW(decode_join(encode(JoinRequest{1, 0, {}})), Error);
  EXPECT_THROW(decode_table(encode_table({{0, random_bytes(gen, kMaxAddressBytes + 1)}})), Error);
  const auto table = encode_table({{0, random_bytes(gen, kMaxAddressBytes)}, {1, random_bytes(gen, 10)}});
  EXPECT_LE(table.size(), max_table_bytes(2));
}

}  // namespace
}  // namespace hyrun::bootstrap
