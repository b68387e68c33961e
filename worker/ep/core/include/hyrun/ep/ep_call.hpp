#pragma once
// The vocabulary of an EP call, shared by every backend (host, CUDA): who takes part
// (Routing), where a dispatch's outputs go (DispatchOutput, RegionRows), and the one
// check of a call's arguments that every backend makes before it sends anything.
//
// Semantics of the calls (match DeepEP / NIXL Elastic EP low-latency mode):
//  * dispatch: x [num_tokens, H] bf16, topk_idx [num_tokens, K] int64 (-1 = none).
//    Selections of experts that live on inactive ranks (Routing::active) or beyond
//    num_ranks*E are dropped (treated as -1) before counting and sending. Every kept
//    (token i, selection k) with global expert g goes to rank g / E, local expert
//    e = g % E, into recv_x[e][src_rank * T + j], where j numbers the source rank's
//    messages for that expert in (token, k) order. The row's source token i and k are
//    in recv_src_token / recv_src_topk; layout_count[e][src] = number of rows from src;
//    recv_count[e] = sum over sources. Rows not covered by a layout count are untouched.
//  * combine: expert outputs [E, R*T, H] bf16 at the same rows go back to their source
//    ranks; each source computes out[i] = sum over kept k (in order) of
//    topk_weights[i][k] * row, accumulated in float, stored bf16. Tokens without a kept
//    selection give zeros.
//  * Each call is split into *_send (puts + signals, returns at once) and *_recv (waits
//    for every active rank's signal, then unpacks/reduces). dispatch() / combine() do
//    both. Calls must alternate dispatch, combine on every active rank, with the same
//    Routing on every rank; that order is what makes re-using the single receive
//    region safe without extra synchronisation.
//  * A missing signal ends the wait at the deadline with PeerTimeoutError naming the
//    ranks; the caller may mark them inactive and run the next call with the new
//    routing. (Late data of the failed epoch can land in the region afterwards; the
//    epoch numbers in the signal words make it harmless for the signal logic.)
//  * Failed peers: when every missing rank is known dead (Transport::known_failed) the
//    wait ends at once with PeerFailureError naming them. *_send signals every healthy
//    active rank even when writes to some ranks failed, then throws PeerFailureError
//    (or PeerTimeoutError for writes that did not complete) naming only those ranks, so
//    the survivors' waits name the dead rank and not the sender. Recovery: every
//    survivor masks the ranks in Routing::active, calls set_epoch with an agreed new
//    epoch, and goes on with the next dispatch.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "hyrun/common/error.hpp"
#include "hyrun/ep/layout.hpp"

namespace hyrun::ep {

/// Which ranks take part in a call. Experts of inactive ranks stay in the numbering.
struct Routing {
  int num_ranks = 1;            ///< ranks in the expert numbering (<= Shape::max_ranks)
  std::vector<uint8_t> active;  ///< size num_ranks, non-zero = active; empty = all active
  bool is_active(int r) const { return r >= 0 && r < num_ranks && (active.empty() || active[r] != 0); }
  static Routing all(int num_ranks) { return Routing{num_ranks, {}}; }
};

/// Caller-owned dispatch outputs (sizes in layout.hpp). This is also the handle that
/// combine needs (layout_count, recv_src_token, recv_src_topk).
struct DispatchOutput {
  void* recv_x = nullptr;             ///< [E, R*T, H] uint8 FP8 codes, or uint16 bf16
  float* recv_scales = nullptr;       ///< [E, R*T, H/128] (FP8 only; may be null for BF16)
  int32_t* recv_src_token = nullptr;  ///< [E, R*T]
  int32_t* recv_src_topk = nullptr;   ///< [E, R*T]
  int32_t* layout_count = nullptr;    ///< [E, R]
  int32_t* recv_count = nullptr;      ///< [E]
};

/// recv_x and recv_scales as views of a rank's receive region (HostBackend::region_rows).
struct RegionRows {
  void* recv_x = nullptr;        ///< [E, R*T, H] FP8 codes or bf16, as DispatchOutput::recv_x
  float* recv_scales = nullptr;  ///< [E, R*T, H/128] (FP8; nullptr for BF16)
};

/// Applies the mask: the global expert of a selection if it is kept, else -1.
inline int64_t kept_expert(int64_t idx, int experts_per_rank, const Routing& r) {
  return mask_expert(idx, experts_per_rank, r.num_ranks, r.active.empty() ? nullptr : r.active.data());
}

/// A wait for peers' completion signals reached its deadline. ranks(): the silent ones.
class PeerTimeoutError : public TimeoutError {
 public:
  PeerTimeoutError(const std::string& message, std::vector<int> ranks)
      : TimeoutError(message), ranks_(std::move(ranks)) {}
  const std::vector<int>& ranks() const noexcept { return ranks_; }

 private:
  std::vector<int> ranks_;
};

/// A put or flush to a peer failed (e.g. the peer died). ranks(): the failed peers.
class PeerFailureError : public Error {
 public:
  PeerFailureError(const std::string& message, std::vector<int> ranks) : Error(message), ranks_(std::move(ranks)) {}
  const std::vector<int>& ranks() const noexcept { return ranks_; }

 private:
  std::vector<int> ranks_;
};

/// "1, 3, 6"
std::string format_ranks(const std::vector<int>& ranks);

/// The checks of a dispatch call's arguments that every backend makes before it sends
/// anything; each throws UsageError naming the argument, its value and the range allowed.
/// `ranks`: how many ranks the backend can reach (its transport's, or its peer regions),
/// `ranks_what` names them in the message. `rank`: the calling rank, which must be active.
void check_dispatch_call(const Shape& shape, int num_tokens, const Routing& routing, int rank, int ranks,
                         const char* ranks_what);
/// A token's selected experts must be distinct (DeepEP's contract: a token goes to an
/// expert once). `topk_idx`: host memory, num_tokens x topk. Throws UsageError naming the
/// token, the expert and both top-k slots.
void check_distinct_experts(std::span<const int64_t> topk_idx, int topk);
/// num_tokens of a combine call within [0, max_tokens]; throws UsageError.
void check_combine_call(const Shape& shape, int num_tokens);

}  // namespace hyrun::ep
