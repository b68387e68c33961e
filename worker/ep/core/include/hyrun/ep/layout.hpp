#pragma once
// Shapes, buffer sizes and bandwidth accounting of the low-latency EP dispatch/combine.
//
// Notation: R = max_ranks (the largest world the job can reach; buffers are allocated
// once for it), T = max_tokens (tokens per rank per call, upper bound), H = hidden,
// K = topk, E = experts_per_rank (local experts). The routing of one call covers
// num_ranks <= R ranks, i.e. num_ranks * E global experts; expert g lives on rank g / E
// as local expert g % E.
//
// ---------------------------------------------------------------------------------
// Buffers each rank needs (all sizes in bytes; functions below compute them):
//
//  1. Receive region, registered for one-sided writes by every peer (Transport::region):
//       region_bytes(shape) = dispatch data   E * R * T * dispatch_slot_bytes(H)
//                           + dispatch counts R * E * 4            (rounded up to 64)
//                           + combine data    T * K * H * 2
//                           + signals         2 * R * 8            (rounded up to 64)
//     dispatch_slot_bytes(H) = bf16_message_bytes(H) = 16 + 2H (room for either format),
//     every part 64-byte aligned. Layout: RegionLayout / region_layout(shape).
//     Must be zero-filled before its first use (signals start at epoch 0).
//  2. Send staging (host backend; private): T * (H + H/128*4), each token cast to FP8
//     once (send_staging_bytes); plus, only when a peer's region is not mapped here, the
//     headers and scales of the messages to it (per destination and expert, one put each).
//     The host backend splits the dispatch-data slots into payload, scale and header
//     arrays (host_dispatch_area.hpp). The CUDA backend writes messages directly into the
//     peers' regions and needs no staging.
//  3. Dispatch outputs (private, DispatchOutput):
//       recv_x       E * R * T * H bytes (FP8) or * 2 (BF16)      recv_x_bytes(shape, fmt)
//       recv_scales  E * R * T * (H/128) floats (FP8 only)        recv_scales_count
//       recv_src_token, recv_src_topk   E * R * T int32 each      recv_rows(shape)
//       layout_count E * R int32, recv_count E int32
//  4. Combine input: expert outputs [E, R*T, H] bf16 (expert_out_bytes) -- the same row
//     positions as recv_x; combine output [T, H] bf16.
// ---------------------------------------------------------------------------------
#include <cstddef>
#include <cstdint>
#include <string>

#include "hyrun/ep/per_token.hpp"

namespace hyrun::ep {

enum class Format : int { kFP8 = 1, kBF16 = 2 };
const char* to_string(Format f);

struct Shape {
  int max_ranks = 1;         ///< R: largest world the buffers serve
  int max_tokens = 128;      ///< T: tokens per rank per call (a call may pass fewer)
  int hidden = 7168;         ///< H: multiple of 128 (FP8 also needs a multiple of 512 in DeepEP; 128 suffices here)
  int topk = 8;              ///< K
  int experts_per_rank = 2;  ///< E
  /// Throws hyrun::UsageError naming the bad field.
  void validate() const;
  std::string describe() const;
};

/// Offsets (bytes) of the parts of one rank's receive region; identical on every rank.
struct RegionLayout {
  std::size_t dispatch_data = 0;     ///< [E][R][T] slots of slot_bytes: message from src rank r, j-th in its order
  std::size_t slot_bytes = 0;        ///< dispatch_slot_bytes(H)
  std::size_t dispatch_counts = 0;   ///< [R][E] int32: messages from rank r for local expert e
  std::size_t combine_data = 0;      ///< [T][K] rows of H bf16: expert output of this rank's token i, selection k
  std::size_t dispatch_signals = 0;  ///< [R] uint64: epoch of the last completed dispatch from rank r
  std::size_t combine_signals = 0;   ///< [R] uint64: epoch of the last completed combine from rank r
  std::size_t total = 0;
};
RegionLayout region_layout(const Shape& s);

inline std::size_t dispatch_slot_bytes(int hidden) { return bf16_message_bytes(hidden); }
inline std::size_t region_bytes(const Shape& s) { return region_layout(s).total; }
inline std::size_t send_staging_bytes(const Shape& s) {
  return static_cast<std::size_t>(s.max_tokens) * (s.hidden + static_cast<std::size_t>(s.hidden / kScaleBlock) * 4);
}
/// Rows of recv_x / expert outputs per local expert: R * T.
inline std::size_t rows_per_expert(const Shape& s) { return static_cast<std::size_t>(s.max_ranks) * s.max_tokens; }
/// Rows of recv_x / expert outputs in all: E * R * T.
inline std::size_t recv_rows(const Shape& s) { return s.experts_per_rank * rows_per_expert(s); }
inline std::size_t recv_x_bytes(const Shape& s, Format f) {
  return recv_rows(s) * s.hidden * (f == Format::kFP8 ? 1 : 2);
}
inline std::size_t recv_scales_count(const Shape& s) { return recv_rows(s) * (s.hidden / kScaleBlock); }
inline std::size_t expert_out_bytes(const Shape& s) { return recv_rows(s) * s.hidden * 2; }
inline std::size_t message_bytes(int hidden, Format f) {
  return f == Format::kFP8 ? fp8_message_bytes(hidden) : bf16_message_bytes(hidden);
}

// ---------------------------------------------------------------- bandwidth
// Logical bytes, as the reference benchmark counts them: every valid selection counts,
// traffic to the rank itself included; the header is counted for FP8 only.
/// FP8: H + H/128*4 + 16; BF16: 2H.
std::size_t dispatch_bytes_per_selection(int hidden, Format f);
/// Combine always moves BF16: 2H.
std::size_t combine_bytes_per_selection(int hidden);
/// Valid selections of one rank: entries of topk_idx [num_tokens, topk] that are >= 0
/// and whose expert's rank is active (active == nullptr: all ranks active;
/// otherwise active[r] != 0 for r < num_ranks, experts beyond num_ranks*E are invalid).
std::size_t count_valid_selections(const int64_t* topk_idx, int num_tokens, int topk, int experts_per_rank,
                                   int num_ranks, const uint8_t* active);
std::size_t dispatch_bytes(std::size_t valid_selections, int hidden, Format f);
std::size_t combine_bytes(std::size_t valid_selections, int hidden);
/// (dispatch_bytes + combine_bytes) / 1e9 / avg_seconds; the logical GB/s of the reference.
double bandwidth_gbps(std::size_t dispatch_bytes, std::size_t combine_bytes, double avg_seconds);

}  // namespace hyrun::ep
