#pragma once
// HMAC-SHA256 (RFC 2104, FIPS 198-1) and SHA-256 over GNU Nettle, and the constant-time
// comparison that checks such a code. The one owner of the keyed codes that hyrun's
// protocols carry: the node link (launcher/link_seal.cpp), the elastic join
// (worker/ep/join/join_protocol.cpp) and the worker's messages (worker/src/message_auth.cpp).
// Nettle, not OpenSSL 3: OpenSSL's first HMAC in a process sets up its providers (about
// 1 ms of CPU, and 0.6 ms more for its random generator), paid by every rank at its start
// (docs/performance-journal.md); Nettle has no global state. Nothing here names Nettle's types.
#include <array>
#include <cstddef>
#include <span>
#include <string_view>

namespace hyrun {

inline constexpr std::size_t kHmacSha256Bytes = 32;
using HmacSha256 = std::array<std::byte, kHmacSha256Bytes>;

/// HMAC-SHA256 of `message` under `key`. A key of any length is allowed (one longer than
/// SHA-256's block is hashed first, per RFC 2104).
HmacSha256 hmac_sha256(std::span<const std::byte> key, std::span<const std::byte> message);
/// The same for a text message (its bytes, without a terminator).
HmacSha256 hmac_sha256(std::span<const std::byte> key, std::string_view message);
/// The same for a text key and a text message.
HmacSha256 hmac_sha256(std::string_view key, std::string_view message);

using Sha256 = std::array<std::byte, 32>;
/// SHA-256 (FIPS 180-4) of `message`.
Sha256 sha256(std::span<const std::byte> message);

/// True when `a` and `b` hold the same bytes. For equal sizes the time taken depends on the
/// size only, never on where the bytes differ, so a forger learns nothing from timing; sizes
/// that differ are refused at once (a code's size is no secret).
bool equal_in_constant_time(std::span<const std::byte> a, std::span<const std::byte> b);
/// The same for text (hex codes).
bool equal_in_constant_time(std::string_view a, std::string_view b);

}  // namespace hyrun
