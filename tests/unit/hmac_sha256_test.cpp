// The one HMAC-SHA256 of hyrun (common/hmac_sha256.hpp) against the known answers of
// RFC 4231, and the comparison that checks codes.
#include "hyrun/common/hmac_sha256.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hyrun/common/hex.hpp"
#include "hyrun/common/nonce.hpp"

namespace hyrun {
namespace {

std::vector<std::byte> repeated(unsigned char value, std::size_t count) {
  return std::vector<std::byte>(count, static_cast<std::byte>(value));
}

std::vector<std::byte> bytes_of(std::string_view text) {
  const auto bytes = std::as_bytes(std::span(text));
  return {bytes.begin(), bytes.end()};
}

std::string hex_code(std::span<const std::byte> key, std::span<const std::byte> data) {
  return to_hex(hmac_sha256(key, data));
}

// RFC 4231, section 4: test cases 1 to 7 (5 truncates the code to 128 bits).
TEST(HmacSha256, Rfc4231Case1) {
  EXPECT_EQ(hex_code(repeated(0x0b, 20), bytes_of("Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
}

TEST(HmacSha256, Rfc4231Case2KeyShorterThanTheCode) {
  EXPECT_EQ(to_hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(HmacSha256, Rfc4231Case3) {
  EXPECT_EQ(hex_code(repeated(0xaa, 20), repeated(0xdd, 50)),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
}

TEST(HmacSha256, Rfc4231Case4) {
  std::vector<std::byte> key;
  for (unsigned char b = 0x01; b <= 0x19; ++b) key.push_back(static_cast<std::byte>(b));
  EXPECT_EQ(hex_code(key, repeated(0xcd, 50)), "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
}

TEST(HmacSha256, Rfc4231Case5Truncated) {
  EXPECT_EQ(hex_code(repeated(0x0c, 20), bytes_of("Test With Truncation")).substr(0, 32),
            "a3b6167473100ee06e0c796c2955552b");
}

TEST(HmacSha256, Rfc4231Case6KeyLongerThanABlock) {
  EXPECT_EQ(hex_code(repeated(0xaa, 131), bytes_of("Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(HmacSha256, Rfc4231Case7KeyAndDataLongerThanABlock) {
  const std::string data =
      "This is a test using a larger than block-size key and a larger than block-size data. The key needs to be "
      "hashed before being used by the HMAC algorithm.";
  EXPECT_EQ(hex_code(repeated(0xaa, 131), bytes_of(data)),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST(HmacSha256, TheOverloadsAgree) {
  const auto key = bytes_of("job token");
  const auto by_bytes = hmac_sha256(key, bytes_of("a message"));
  EXPECT_EQ(hmac_sha256(key, "a message"), by_bytes);
  EXPECT_EQ(hmac_sha256("job token", "a message"), by_bytes);
  EXPECT_NE(hmac_sha256("job token", "a message."), by_bytes);
  EXPECT_NE(hmac_sha256("job token.", "a message"), by_bytes);
}

TEST(HmacSha256, EmptyKeyAndMessageAreAllowed) {
  // RFC 2104 pads any key to a block; Python's hmac.new(b"", b"", sha256) gives the same.
  EXPECT_EQ(to_hex(hmac_sha256("", "")), "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
}

TEST(EqualInConstantTime, EqualBytesAndTextCompareEqual) {
  EXPECT_TRUE(equal_in_constant_time(std::string_view(), std::string_view()));
  EXPECT_TRUE(equal_in_constant_time("0123abcd", "0123abcd"));
  const auto code = hmac_sha256("k", "m");
  EXPECT_TRUE(equal_in_constant_time(code, hmac_sha256("k", "m")));
}

TEST(EqualInConstantTime, AnyDifferingByteIsFound) {
  // Every position counts, the last as much as the first: nothing stops at a prefix.
  const auto code = hmac_sha256("k", "m");
  for (std::size_t i = 0; i < code.size(); ++i) {
    for (unsigned bit = 0; bit < 8; ++bit) {
      auto changed = code;
      changed[i] ^= static_cast<std::byte>(1u << bit);
      EXPECT_FALSE(equal_in_constant_time(code, changed)) << "byte " << i << " bit " << bit;
    }
  }
}

TEST(EqualInConstantTime, DifferentSizesAreNeverEqual) {
  EXPECT_FALSE(equal_in_constant_time("abc", "abcd"));
  EXPECT_FALSE(equal_in_constant_time("abcd", "abc"));
  EXPECT_FALSE(equal_in_constant_time("", "a"));
  const auto code = hmac_sha256("k", "m");
  EXPECT_FALSE(equal_in_constant_time(code, std::span<const std::byte>(code).first(16))) << "a truncated code";
}

TEST(Nonce, IsFreshHexOf16Bytes) {
  const std::string a = new_nonce("a test's nonce");
  const std::string b = new_nonce("a test's nonce");
  EXPECT_EQ(a.size(), 32u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);
}

// FIPS 180-4's examples (NIST's SHA-256 example values): one block, two blocks, and none.
TEST(Sha256, KnownAnswers) {
  EXPECT_EQ(to_hex(sha256(bytes_of("abc"))), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(to_hex(sha256(bytes_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"))),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(to_hex(sha256({})), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

}  // namespace
}  // namespace hyrun
