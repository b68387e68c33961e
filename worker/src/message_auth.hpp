#pragma once
// Authentication of every message of the worker library's own protocol (bootstrap,
// collectives, point-to-point). UCX delivers a tagged message from anyone who can build
// an endpoint to this worker, and the tag is whatever the sender wrote, so a message is
// trusted only if it carries a code that only holders of the job token can compute:
//
//   payload | tag (8) | source process (8) | destination process (8) | sequence (8) | HMAC-SHA256 (32)
//
// The code covers everything before it. The key is derived from the job token (which
// itself never travels). A process is named by a hash of its UCX worker address, which
// holds a random worker id, so a sealed message is bound to one sending and one
// receiving process: it cannot be replayed to another process, nor to a later
// incarnation of the same rank. `sequence` lets a receiver refuse replays between the
// same two processes (the World numbers point-to-point messages per peer and tag).
#include <ucp/api/ucp.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "hyrun/common/hmac_sha256.hpp"

namespace hyrun::auth {

using ProcessId = uint64_t;

/// The id of the process that owns the UCX worker `address` (first 8 bytes of its SHA-256).
ProcessId process_id(std::span<const std::byte> address);

struct Envelope {
  ucp_tag_t tag = 0;  ///< the UCP tag the message was sent with (the receiver compares)
  ProcessId source = 0;
  ProcessId destination = 0;
  uint64_t sequence = 0;
};

inline constexpr std::size_t kTrailerBytes = 4 * sizeof(uint64_t) + kHmacSha256Bytes;

class MessageAuth {
 public:
  /// Throws hyrun::Error when `job_token` is empty (a job without a token cannot authenticate).
  explicit MessageAuth(std::string_view job_token);

  /// `payload` followed by the trailer for `envelope`.
  std::vector<std::byte> seal(const Envelope& envelope, std::span<const std::byte> payload) const;
  /// Checks the code of `message` (payload + trailer); on success strips the trailer from
  /// `message` and returns the envelope. Returns nullopt, leaving `message` alone, when the
  /// message is too short or its code does not match (not sealed with this job's key).
  std::optional<Envelope> open(std::vector<std::byte>& message) const;

 private:
  HmacSha256 key_{};
};

}  // namespace hyrun::auth
