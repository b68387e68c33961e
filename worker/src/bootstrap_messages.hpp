#pragma once
// The bootstrap messages and their byte encoding (little-endian host order: every rank of
// a job runs the same build on the same architecture).
//   join   (rank -> rank 0): rank, node, worker address, process identity
//   bundle (node leader -> rank 0): the joins of the leader's node, each still sealed by
//          its own rank for rank 0 (node_leader.hpp: the leader carries them unchanged)
//   table  (rank 0 -> rank): the node, worker address and process identity of every rank,
//          by rank
// All travel sealed (message_auth.hpp): the job token never goes over the wire, and a
// decoder only ever sees bytes that a holder of the token sent.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "hyrun/common/process_identity.hpp"
#include "message_auth.hpp"

namespace hyrun::bootstrap {

/// Largest UCX worker address accepted (a worker with many devices has a few KiB).
inline constexpr std::size_t kMaxAddressBytes = std::size_t{16} * 1024;
/// Largest encoded join: rank, node, address, process identity.
inline constexpr std::size_t kMaxJoinBytes = 4 * sizeof(uint32_t) + kMaxAddressBytes + ProcessIdentity::kBytes;
/// Largest encoded table of `ranks` entries.
constexpr std::size_t max_table_bytes(std::size_t ranks) {
  return sizeof(uint32_t) + ranks * (3 * sizeof(uint32_t) + kMaxAddressBytes + ProcessIdentity::kBytes);
}

/// Largest sealed join (a join and its seal's trailer).
inline constexpr std::size_t kMaxSealedJoinBytes = kMaxJoinBytes + auth::kTrailerBytes;
/// Largest encoded bundle of `joins` sealed joins.
constexpr std::size_t max_bundle_bytes(std::size_t joins) {
  return sizeof(uint32_t) + joins * (sizeof(uint32_t) + kMaxSealedJoinBytes);
}

struct JoinRequest {
  int rank = 0;
  int node = 0;  ///< HYRUN node rank of the joining process
  std::vector<std::byte> address;
  ProcessIdentity process;  ///< for ranks of its host to watch
};

struct Peer {
  int node = 0;
  std::vector<std::byte> address;
  ProcessIdentity process;  ///< unknown for a rank without a process yet
  bool operator==(const Peer&) const = default;
};

std::vector<std::byte> encode(const JoinRequest& join);
/// Throws hyrun::Error naming the message if it is truncated, malformed or too large.
JoinRequest decode_join(std::span<const std::byte> bytes);

/// A bundle of sealed joins: count, then each as length and bytes.
std::vector<std::byte> encode_bundle(const std::vector<std::vector<std::byte>>& sealed_joins);
/// Throws hyrun::Error naming the message if it is truncated or malformed, holds more than
/// `max_joins` joins, or a join over kMaxSealedJoinBytes.
std::vector<std::vector<std::byte>> decode_bundle(std::span<const std::byte> bytes, std::size_t max_joins);

std::vector<std::byte> encode_table(const std::vector<Peer>& peers);
/// Throws hyrun::Error naming the message if it is truncated, malformed or too large.
std::vector<Peer> decode_table(std::span<const std::byte> bytes);

}  // namespace hyrun::bootstrap
