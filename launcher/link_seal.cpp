#include "hyrun/launcher/link_seal.hpp"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <charconv>
#include <span>

#include "hyrun/common/error.hpp"
#include "hyrun/common/hex.hpp"

namespace hyrun {
namespace {

constexpr std::size_t kMacDigits = 32;  // 128 bits of the HMAC

std::string hmac(std::string_view key, std::string_view message) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
            reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &length))
    throw Error("HMAC-SHA256 for the node link failed (OpenSSL)");
  return std::string(reinterpret_cast<const char*>(digest), length);
}

std::string hex_of(const std::string& bytes) { return to_hex(std::as_bytes(std::span(bytes.data(), bytes.size()))); }

}  // namespace

std::string new_link_nonce() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1)
    throw Error("no random bytes for the node link's nonce (OpenSSL RAND_bytes)");
  return to_hex(std::as_bytes(std::span(bytes)));
}

std::string link_hello_proof(const std::string& token, int task, std::string_view nonce) {
  return hex_of(hmac(token, fmt::format("{} {} {}", kLinkHello, task, nonce)));
}

LinkSeal::LinkSeal(const std::string& token, int task, std::string_view nonce, Direction direction)
    : key_(hmac(token, fmt::format("{} key {} {}", kLinkHello, task, nonce))),
      direction_(direction == Direction::kToRoot ? "to-root" : "from-root") {}

std::string LinkSeal::mac(std::uint64_t seq, std::string_view body) const {
  return hex_of(hmac(key_, fmt::format("{} {} {}", direction_, seq, body))).substr(0, kMacDigits);
}

std::string LinkSeal::seal(std::string_view body) {
  const std::uint64_t seq = next_++;
  return fmt::format("{} {} {}", mac(seq, body), seq, body);
}

std::optional<std::string> LinkSeal::open(std::string_view line) {
  if (line.size() < kMacDigits + 2 || line[kMacDigits] != ' ') return std::nullopt;
  const std::string_view given = line.substr(0, kMacDigits);
  std::string_view rest = line.substr(kMacDigits + 1);
  const auto space = rest.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  std::uint64_t seq = 0;
  const auto [end, error] = std::from_chars(rest.data(), rest.data() + space, seq);
  if (error != std::errc() || end != rest.data() + space || seq != next_) return std::nullopt;
  const std::string_view body = rest.substr(space + 1);
  const std::string expected = mac(seq, body);
  if (CRYPTO_memcmp(expected.data(), given.data(), kMacDigits) != 0) return std::nullopt;
  ++next_;
  return std::string(body);
}

}  // namespace hyrun
