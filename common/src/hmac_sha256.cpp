#include "hyrun/common/hmac_sha256.hpp"

#include <nettle/hmac.h>
#include <nettle/memops.h>
#include <nettle/sha2.h>

namespace hyrun {
namespace {

std::span<const std::byte> bytes_of(std::string_view text) { return std::as_bytes(std::span(text)); }

const uint8_t* data_of(std::span<const std::byte> bytes) { return reinterpret_cast<const uint8_t*>(bytes.data()); }

}  // namespace

HmacSha256 hmac_sha256(std::span<const std::byte> key, std::span<const std::byte> message) {
  hmac_sha256_ctx context;
  hmac_sha256_set_key(&context, key.size(), data_of(key));
  hmac_sha256_update(&context, message.size(), data_of(message));
  HmacSha256 code{};
  hmac_sha256_digest(&context, code.size(), reinterpret_cast<uint8_t*>(code.data()));
  return code;
}

HmacSha256 hmac_sha256(std::span<const std::byte> key, std::string_view message) {
  return hmac_sha256(key, bytes_of(message));
}

HmacSha256 hmac_sha256(std::string_view key, std::string_view message) {
  return hmac_sha256(bytes_of(key), bytes_of(message));
}

Sha256 sha256(std::span<const std::byte> message) {
  sha256_ctx context;
  sha256_init(&context);
  sha256_update(&context, message.size(), data_of(message));
  Sha256 digest{};
  sha256_digest(&context, digest.size(), reinterpret_cast<uint8_t*>(digest.data()));
  return digest;
}

bool equal_in_constant_time(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && memeql_sec(a.data(), b.data(), a.size()) != 0;
}

bool equal_in_constant_time(std::string_view a, std::string_view b) {
  return equal_in_constant_time(bytes_of(a), bytes_of(b));
}

}  // namespace hyrun
