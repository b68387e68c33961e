#pragma once
// CUDA backend of the low-latency EP dispatch/combine (library hyrun_ep_cuda, built
// only when HYRUN_WITH_CUDA). Same semantics, region layout and message format as the
// host backend (host_backend.hpp); the kernels call the shared per-token functions of
// per_token.hpp, so for identical inputs every output is bit-identical to the host
// backend's (ep-cuda-selftest checks that).
//
// Transport: GPU kernels write directly into the peers' receive regions through device
// pointers: `peer_regions[r]` is rank r's region as seen from this rank's GPU (own
// region: cudaMalloc'ed; peers: CUDA IPC mappings -- see ipc_handle()/open_ipc_handle(),
// exchanged by the caller with World::allgatherv -- or, in the self-test, other
// allocations on the same GPU standing for simulated ranks). Completion per source
// rank: the count words, __threadfence_system(), then the 8-byte epoch word.
// Receivers spin on their signal words on the GPU, bounded by the timeout (%globaltimer);
// ranks that did not signal are recorded in a status array and reported by
// missing_ranks() / throw_if_missing(), which synchronize the stream.
//
// All pointers passed to the calls are device pointers; every call is asynchronous on
// `stream` (launches only). Header compiles without CUDA headers.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "hyrun/ep/host_backend.hpp"
#include "hyrun/ep/layout.hpp"

struct CUstream_st;

namespace hyrun::ep::cuda {

using Stream = CUstream_st*;  ///< cudaStream_t

/// Largest top-k the kernels support.
inline constexpr int kMaxTopk = 32;

/// True if a CUDA device can be used; otherwise false and `why` says why
/// (e.g. "no CUDA device: cudaGetDeviceCount: no CUDA-capable device is detected").
bool device_available(std::string* why);

/// FP8 cast alone (benchmarking): x [rows, hidden] bf16 -> q [rows, hidden] e4m3 codes
/// and scales [rows, hidden/128], exactly as the dispatch does it.
void cast_fp8(const uint16_t* x, int rows, int hidden, uint8_t* q, float* scales, Stream stream);

/// CUDA IPC handle (64 bytes) of a cudaMalloc'ed region, to exchange with peers.
std::vector<std::byte> ipc_handle(void* device_region);
/// Maps a peer's region from its handle (cudaIpcMemLazyEnablePeerAccess).
void* open_ipc_handle(const std::vector<std::byte>& handle);
void close_ipc_handle(void* mapped);

/// Allocates and zeroes region_bytes(shape) of device memory (a rank's receive region).
void* alloc_region(const Shape& shape);
void free_region(void* region);

class CudaBackend {
 public:
  /// peer_regions: size >= every routing's num_ranks, [rank] is this rank's own region.
  CudaBackend(const Shape& shape, int rank, const std::vector<void*>& peer_regions, std::chrono::milliseconds timeout);
  ~CudaBackend();
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  const Shape& shape() const { return shape_; }
  uint64_t epoch() const { return epoch_; }
  /// Epoch of the last call; the next dispatch uses epoch()+1. Every rank of a call must
  /// use the same epoch, and epochs must grow over the whole job (the signal words keep
  /// the last epoch each source wrote). Ranks that start together need nothing; when
  /// ranks join (elastic phase change), every rank calls set_epoch with an agreed value
  /// above every epoch used so far, e.g. (uint64_t(phase) << 32).
  void set_epoch(uint64_t epoch) { epoch_ = epoch; }

  /// Count kernel (slots per selection, counts per expert), dispatch kernel (FP8 cast or
  /// BF16 copy straight into the destination regions), signal kernel.
  /// x [num_tokens, H] bf16, topk_idx [num_tokens, K] int64 (device). Distinct experts
  /// per token are assumed (not checked on the device; overflowing slots are dropped).
  void dispatch_send(const uint16_t* x, const int64_t* topk_idx, int num_tokens, const Routing& routing, Format f,
                     Stream stream);
  /// Wait kernel (bounded) then unpack kernel into `out` (device buffers).
  void dispatch_recv(const DispatchOutput& out, Stream stream);
  /// Puts every received row's expert output back to its source region, then signals.
  void combine_send(const uint16_t* expert_out, const DispatchOutput& handle, Stream stream);
  /// Wait kernel then the weighted-sum kernel: out [num_tokens, H] bf16 (device).
  void combine_recv(const int64_t* topk_idx, const float* topk_weights, int num_tokens, uint16_t* out, Stream stream);

  /// Synchronizes `stream`; the ranks whose signal did not arrive in the last waits.
  std::vector<int> missing_ranks(Stream stream);
  /// Synchronizes and throws PeerTimeoutError naming the missing ranks, if any.
  void throw_if_missing(Stream stream);

 private:
  Shape shape_;
  int rank_;
  int num_peers_;
  std::chrono::milliseconds timeout_;
  RegionLayout layout_;
  uint64_t epoch_ = 0;
  Routing routing_;
  Format format_ = Format::kFP8;
  std::vector<uint8_t> active_host_;
  std::vector<void*> peer_regions_;
  void* region_of_self() const { return peer_regions_[static_cast<std::size_t>(rank_)]; }
  // device scratch
  void** d_regions_ = nullptr;    // [num_peers]
  uint8_t* d_active_ = nullptr;   // [max_ranks]
  int32_t* d_slot_ = nullptr;     // [T*K] slot of each selection, -1 = dropped
  int32_t* d_counts_ = nullptr;   // [max_ranks*E] messages per global expert
  int32_t* d_missing_ = nullptr;  // [max_ranks] 1 = no signal by the deadline
};

}  // namespace hyrun::ep::cuda
