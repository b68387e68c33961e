#include "message_auth.hpp"

#include <gtest/gtest.h>

#include <random>

#include "hyrun/common/error.hpp"
#include "random_bytes.hpp"

namespace hyrun::auth {
namespace {

using test_support::random_bytes;

const Envelope kEnvelope{0x3000010000000007ULL, 11, 22, 5};

TEST(MessageAuth, SealedMessagesOpenWithTheSameToken) {
  std::mt19937 gen(std::random_device{}());
  const MessageAuth a("0123456789abcdef0123456789abcdef");
  for (std::size_t size : {0, 1, 1000, 100000}) {
    const auto payload = random_bytes(gen, size);
    auto message = a.seal(kEnvelope, payload);
    EXPECT_EQ(message.size(), size + kTrailerBytes);
    const auto envelope = a.open(message);
    ASSERT_TRUE(envelope) << size;
    EXPECT_EQ(envelope->tag, kEnvelope.tag);
    EXPECT_EQ(envelope->source, kEnvelope.source);
    EXPECT_EQ(envelope->destination, kEnvelope.destination);
    EXPECT_EQ(envelope->sequence, kEnvelope.sequence);
    EXPECT_EQ(message, payload);
  }
}

TEST(MessageAuth, AnotherTokenOrAnyChangedByteIsRefused) {
  std::mt19937 gen(std::random_device{}());
  const MessageAuth a("0123456789abcdef0123456789abcdef");
  const MessageAuth b("0123456789abcdef0123456789abcdee");
  const auto sealed = a.seal(kEnvelope, random_bytes(gen, 100));
  auto other = sealed;
  EXPECT_FALSE(b.open(other));
  EXPECT_EQ(other, sealed) << "a refused message is left alone";
  for (std::size_t i = 0; i < sealed.size(); ++i) {
    auto changed = sealed;
    changed[i] ^= std::byte{0x01};
    EXPECT_FALSE(a.open(changed)) << "byte " << i;
  }
  for (std::size_t cut = 0; cut < kTrailerBytes; ++cut) {
    std::vector<std::byte> short_message(cut);
    EXPECT_FALSE(a.open(short_message));
  }
}

TEST(MessageAuth, EmptyTokenIsAnError) { EXPECT_THROW(MessageAuth(""), Error); }

TEST(MessageAuth, ProcessIdsFollowTheAddress) {
  std::mt19937 gen(std::random_device{}());
  const auto address = random_bytes(gen, 200);
  auto other = address;
  other[100] ^= std::byte{1};
  EXPECT_EQ(process_id(address), process_id(address));
  EXPECT_NE(process_id(address), process_id(other));
}

}  // namespace
}  // namespace hyrun::auth
