#pragma once
// Internal: launch functions of the EP CUDA kernels (cuda_kernels.cu, C++17 under nvcc),
// called by CudaBackend (cuda_backend.cpp, C++20 under the host compiler).
//
// Peer state shared by every kernel of a backend (PeerState): the routing's active flags
// of the call with the mask applied (`live`), a device mask that persists across calls
// (a source that timed out or is known dead is masked: neither signalled, written nor
// read until the host unmasks it), `failed` words in mapped pinned host memory (written
// by the host when the worker library reports a dead peer; device waits for it end at
// once), and in device memory `missing` (set by the device when a wait for a rank ended
// without its signal; cleared by the host once reported) and `error` (the first repeated
// expert, corrupt message or handle seen; once set, nothing more is signalled or written
// into a peer's region, and nothing more is waited for). The host reads missing and error
// after synchronizing the stream.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "hyrun/ep/per_token.hpp"

namespace hyrun::ep::cuda::detail {

struct Params {
  int rank = 0;       // this rank
  int num_ranks = 1;  // routing ranks of the call
  int max_ranks = 1;  // R
  int T = 1, H = 128, K = 1, E = 1;
  unsigned long long slot_bytes = 0, off_dispatch = 0, off_counts = 0, off_combine = 0, off_dsig = 0, off_csig = 0;
  unsigned long long epoch = 0;       // of the call: signal value and part of the message magic
  int fp8 = 1;                        // dispatch format of the call
  unsigned long long timeout_ns = 0;  // bound of every device wait for a peer's signal
};

/// Codes of DeviceError::code (0: none).
enum DeviceErrorCode : int32_t {
  kErrNone = 0,
  kErrMagic = 1,   // header magic is not this epoch's and format's (stale or foreign slot)
  kErrSource = 2,  // header names another source rank than the slot's
  kErrToken = 3,   // header's source token outside [0, T)
  kErrTopk = 4,    // header's top-k slot outside [0, K)
  kErrHandle = 5,  // combine handle: a row's source token / top-k outside its bounds
  // This rank's own topk_idx: a token selects one expert twice (src: this rank, row: the
  // token, value: the expert); found by the count kernel, nothing is then sent.
  kErrDuplicateExpert = 6,
};

/// First error the device saw (device memory; the host reads it after a sync).
struct DeviceError {
  int32_t claim;  // 0 free, 1 taken by the first error (its details follow)
  int32_t code;
  int32_t src;    // source rank of the message (or of the handle row; this rank: a repeated expert)
  int32_t row;    // row index [E, R*T] of the slot (a repeated expert: the token)
  int32_t value;  // the offending value (magic, rank, token, top-k or the repeated expert)
};

struct PeerState {
  uint8_t* live;          // [max_ranks] device: routing.active && !mask, set by the prepare kernel
  const uint8_t* active;  // [max_ranks] device: the routing's flags of the call
  int32_t* mask;          // [max_ranks] device, persists across calls
  int32_t* failed;        // [max_ranks] mapped host, set by the host (peer known dead)
  int32_t* missing;       // [max_ranks] device, set by the device (wait ended without signal)
  DeviceError* error;     // device
  int32_t* counters;      // [2 + E] device, zero between kernels: blocks done of the fused
                          // dispatch [0] and combine_send [1] kernels (the last one signals),
                          // sources done per local expert in unpack [2 + e] (the last one counts)
};

struct DevOut {
  void* recv_x;
  float* recv_scales;
  int32_t* src_token;
  int32_t* src_topk;
  int32_t* layout_count;
  int32_t* recv_count;
};

/// kMessageMagic mixed with the format and the epoch: a slot written in another call (a
/// slow peer's stale message, an earlier phase) does not pass for this call's message.
HYRUN_HD_INLINE uint32_t message_magic(uint32_t base, int fp8, unsigned long long epoch) {
  const auto lo = static_cast<uint32_t>(epoch), hi = static_cast<uint32_t>(epoch >> 32);
  return base ^ (fp8 ? 1u : 2u) ^ (lo * 0x9E3779B1u) ^ (hi * 0x85EBCA77u);
}

/// live = active && !mask, then slots and counts per global expert (slot -1: dropped).
cudaError_t launch_count(const Params& p, const PeerState& peers, const int64_t* idx, int num_tokens, int32_t* slot,
                         int32_t* counts, cudaStream_t s);
/// Messages (header, FP8 or BF16 payload) straight into the destinations' regions; the
/// last block to finish then signals every live destination (counts, fence, release).
cudaError_t launch_dispatch(const Params& p, const PeerState& peers, void* const* regions, const uint16_t* x,
                            const int64_t* idx, const int32_t* slot, const int32_t* counts, int num_tokens,
                            cudaStream_t s);
/// A one-block wait kernel (bounded acquire waits for every live source's dispatch signal),
/// then per (local expert, live source): header checks, copy into `out`; writes every
/// layout_count and recv_count.
cudaError_t launch_unpack(const Params& p, const PeerState& peers, void* own, const DevOut& out, cudaStream_t s);
/// Per (local expert, live source): expert output rows back into the source's region;
/// the last block to finish then signals every live source (fence, release).
cudaError_t launch_combine_send(const Params& p, const PeerState& peers, void* const* regions,
                                const int32_t* layout_count, const int32_t* src_token, const int32_t* src_topk,
                                const uint16_t* expert_out, cudaStream_t s);
/// Bounded acquire wait for every live source's combine signal.
cudaError_t launch_combine_wait(const Params& p, const PeerState& peers, void* own, cudaStream_t s);
/// out[i] = sum over kept k of w_k * row_k (rows of masked sources count as absent).
cudaError_t launch_combine_reduce(const Params& p, const PeerState& peers, const void* own, const int64_t* idx,
                                  const float* weights, int num_tokens, uint16_t* out, cudaStream_t s);
cudaError_t launch_cast_fp8(const uint16_t* x, int rows, int H, uint8_t* q, float* scales, cudaStream_t s);
/// Adds to *mismatches the floats whose code from floats_to_fp8x2_e4m3 differs from
/// float_to_fp8_e4m3's (every float, as the low and as the high value); *first: the
/// smallest such float's bits (atomicMin: set it to 0xFFFFFFFF first).
cudaError_t launch_fp8_conversion_check(unsigned long long* mismatches, uint32_t* first, cudaStream_t s);

}  // namespace hyrun::ep::cuda::detail
