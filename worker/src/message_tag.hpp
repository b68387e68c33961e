#pragma once
// Layout of the 64-bit UCP tags the worker library uses, so that bootstrap traffic,
// collectives and users' point-to-point messages never match each other:
//   bits 63..60 kind | bits 59..40 source rank | bits 39..0 payload (user tag or sequence)
#include <ucp/api/ucp.h>

#include <cstdint>

namespace hyrun::tag {

enum class Kind : uint64_t { kJoin = 1, kTable = 2, kPointToPoint = 3, kCollective = 4 };

inline constexpr int kMaxRanks = 1 << 20;
inline constexpr uint64_t kFullMask = ~uint64_t{0};
inline constexpr uint64_t kKindMask = uint64_t{0xF} << 60;
inline constexpr uint64_t kPayloadMask = (uint64_t{1} << 40) - 1;

constexpr ucp_tag_t make(Kind kind, int source_rank, uint64_t payload) {
  return (static_cast<uint64_t>(kind) << 60) | (static_cast<uint64_t>(source_rank) << 40) | (payload & kPayloadMask);
}

constexpr int source_of(ucp_tag_t tag) { return static_cast<int>((tag >> 40) & (kMaxRanks - 1)); }
constexpr uint64_t payload_of(ucp_tag_t tag) { return tag & kPayloadMask; }

// The payloads of kJoin: one rank's join, or a node leader's bundle of its node's joins
// (bootstrap_messages.hpp). Both match rank 0's one receive of kind kJoin.
inline constexpr uint64_t kOneJoin = 0;
inline constexpr uint64_t kJoinBundle = 1;

}  // namespace hyrun::tag
