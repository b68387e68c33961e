#include "message_auth.hpp"

#include <cstring>

#include "hyrun/common/error.hpp"
#include "hyrun/common/hmac_sha256.hpp"

namespace hyrun::auth {
namespace {

constexpr std::size_t kMacBytes = kHmacSha256Bytes;
constexpr std::string_view kKeyLabel = "hyrun world messages v1";

void put_u64(std::byte* out, uint64_t v) { std::memcpy(out, &v, sizeof v); }
uint64_t get_u64(const std::byte* in) {
  uint64_t v;
  std::memcpy(&v, in, sizeof v);
  return v;
}

}  // namespace

ProcessId process_id(std::span<const std::byte> address) {
  const Sha256 digest = sha256(address);
  ProcessId id;
  static_assert(sizeof id <= sizeof digest);
  std::memcpy(&id, digest.data(), sizeof id);
  return id;
}

MessageAuth::MessageAuth(std::string_view job_token) {
  if (job_token.empty()) throw Error("the job token (HYRUN_JOB_TOKEN) is empty: messages cannot be authenticated");
  // A key of its own for this use, so that the token's other uses never share it.
  key_ = hmac_sha256(job_token, kKeyLabel);
}

std::vector<std::byte> MessageAuth::seal(const Envelope& envelope, std::span<const std::byte> payload) const {
  std::vector<std::byte> message(payload.size() + kTrailerBytes);
  if (!payload.empty()) std::memcpy(message.data(), payload.data(), payload.size());
  std::byte* trailer = message.data() + payload.size();
  put_u64(trailer, envelope.tag);
  put_u64(trailer + 8, envelope.source);
  put_u64(trailer + 16, envelope.destination);
  put_u64(trailer + 24, envelope.sequence);
  const HmacSha256 code = hmac_sha256(key_, std::span(message).first(message.size() - kMacBytes));
  std::memcpy(message.data() + message.size() - kMacBytes, code.data(), kMacBytes);
  return message;
}

std::optional<Envelope> MessageAuth::open(std::vector<std::byte>& message) const {
  if (message.size() < kTrailerBytes) return std::nullopt;
  const HmacSha256 expected = hmac_sha256(key_, std::span(message).first(message.size() - kMacBytes));
  if (!equal_in_constant_time(expected, std::span(message).last(kMacBytes))) return std::nullopt;
  const std::byte* trailer = message.data() + message.size() - kTrailerBytes;
  Envelope envelope{get_u64(trailer), get_u64(trailer + 8), get_u64(trailer + 16), get_u64(trailer + 24)};
  message.resize(message.size() - kTrailerBytes);
  return envelope;
}

}  // namespace hyrun::auth
