#include "hyrun/common/hmac_sha256.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "hyrun/common/error.hpp"

namespace hyrun {
namespace {

std::span<const std::byte> bytes_of(std::string_view text) { return std::as_bytes(std::span(text)); }

}  // namespace

HmacSha256 hmac_sha256(std::span<const std::byte> key, std::span<const std::byte> message) {
  HmacSha256 code{};
  unsigned int length = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
            reinterpret_cast<const unsigned char*>(message.data()), message.size(),
            reinterpret_cast<unsigned char*>(code.data()), &length) ||
      length != code.size())
    throw Error("computing an HMAC-SHA256 (OpenSSL) failed");
  return code;
}

HmacSha256 hmac_sha256(std::span<const std::byte> key, std::string_view message) {
  return hmac_sha256(key, bytes_of(message));
}

HmacSha256 hmac_sha256(std::string_view key, std::string_view message) {
  return hmac_sha256(bytes_of(key), bytes_of(message));
}

bool equal_in_constant_time(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

bool equal_in_constant_time(std::string_view a, std::string_view b) {
  return equal_in_constant_time(bytes_of(a), bytes_of(b));
}

}  // namespace hyrun
