#pragma once
// CUDA backend of the low-latency EP dispatch/combine (library hyrun_ep_cuda, built
// only when HYRUN_WITH_CUDA). Same semantics, region layout and message format as the
// host backend (ep_call.hpp); the kernels call the shared per-token functions of
// per_token.hpp, so for identical inputs every output is bit-identical to the host
// backend's (ep-cuda-selftest checks that; run on one H100: docs/performance.md).
//
// Transport: GPU kernels write directly into the peers' receive regions through device
// pointers: `peer_regions[r]` is rank r's region as seen from this rank's GPU (own
// region: cudaMalloc'ed; peers: CUDA IPC mappings, see cuda_memory.hpp; in the self-test,
// other allocations on the same GPU standing for simulated ranks). Completion per source
// rank: the count words, a system fence, then a release store of the 8-byte epoch word
// at system scope; receivers spin on the GPU with acquire loads, bounded by the timeout.
//
// Contract:
//  * One stream: the backend owns a non-blocking stream (stream()) and puts all of its
//    work on it, copies and memsets included. Callers put their own work touching the
//    call's tensors on the same stream (or synchronize) and pass device pointers.
//  * Calls are asynchronous; synchronize() ends a call's wait on the host (bounded) and
//    turns what the device recorded into exceptions. Call it after every dispatch_recv
//    and combine_recv before trusting the outputs.
//  * Peers that fail are masked on the device, persistently: a source whose signal did
//    not come within the timeout, or that the host marked failed (mark_failed, e.g. from
//    World::peer_failed; the device wait for it then ends at once), is neither signalled,
//    written nor read by later calls until unmask_peer / set_peer_region. So a slow peer
//    cannot have its slots overwritten by the next dispatch, and nobody sums its stale rows.
//  * A token whose selections repeat an expert is refused as the host backend refuses it
//    (check_distinct_experts): the count kernel finds it, nothing is sent or signalled,
//    and synchronize() throws the UsageError naming the token, the expert and both top-k
//    slots. The check costs no host copy or sync on the calls that pass it.
//  * Every message header is checked on the device (magic mixed with the call's epoch and
//    format, source rank, token and top-k bounds), and so is every row of the combine
//    handle before it forms an address in a peer's region. The first bad one is recorded;
//    from then on the backend neither signals nor writes into any peer, and synchronize()
//    throws Error naming the source rank, the row and the bad field.
//
// Header compiles without CUDA headers.
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hyrun/ep/ep_call.hpp"
#include "hyrun/ep/layout.hpp"

struct CUstream_st;

namespace hyrun::ep::cuda {

namespace detail {
struct PeerState;  // cuda_kernels.hpp: what the kernels get of the peers' state
}  // namespace detail

using Stream = CUstream_st*;  ///< cudaStream_t

/// Largest top-k the kernels support.
inline constexpr int kMaxTopk = 32;
/// Largest max_ranks the kernels support (their shared live-flag array).
inline constexpr int kMaxRanks = 1024;

/// True if a CUDA device can be used; otherwise false and `why` says why
/// (e.g. "no CUDA device: cudaGetDeviceCount: no CUDA-capable device is detected").
bool device_available(std::string* why);

/// FP8 cast alone (benchmarking): x [rows, hidden] bf16 -> q [rows, hidden] e4m3 codes
/// and scales [rows, hidden/128], exactly as the dispatch does it.
void cast_fp8(const uint16_t* x, int rows, int hidden, uint8_t* q, float* scales, Stream stream);

/// The FP8 conversion of the kernels (one instruction for two values) against the shared
/// software one (float_to_fp8_e4m3), on the device, for every one of the 2^32 floats.
/// Returns how many differ; *first (when not null) gets the smallest differing float's
/// bits. ep-cuda-selftest requires 0: the kernels are then bit-identical to the host cast.
uint64_t fp8_conversion_mismatches(uint32_t* first);

/// Allocates and zeroes region_bytes(shape) of device memory (a rank's receive region).
void* alloc_region(const Shape& shape);
void free_region(void* region);

class CudaBackend {
 public:
  /// peer_regions: size >= every routing's num_ranks, [rank] is this rank's own region;
  /// nullptr for a peer not attached yet (it must be inactive or masked until it is).
  CudaBackend(const Shape& shape, int rank, const std::vector<void*>& peer_regions, std::chrono::milliseconds timeout);
  /// Synchronizes the stream (bounded by the device waits' timeout), then frees.
  ~CudaBackend();
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  const Shape& shape() const { return shape_; }
  int rank() const { return rank_; }
  /// The one stream of all this backend's work.
  Stream stream() const { return stream_; }
  uint64_t epoch() const { return epoch_; }
  /// Epoch of the last call; the next dispatch uses epoch()+1. Every rank of a call must
  /// use the same epoch, and epochs must grow over the whole job (the signal words keep
  /// the last epoch each source wrote). Ranks that start together need nothing; when
  /// ranks join (elastic phase change), every rank calls set_epoch with an agreed value
  /// above every epoch used so far, e.g. (uint64_t(phase) << 32).
  void set_epoch(uint64_t epoch) { epoch_ = epoch; }

  /// Rank r's region is now `region` (a replaced peer's new mapping) or nullptr (r is
  /// detached: masked until it gets a region again). A non-null region unmasks r and
  /// clears its failed mark. Synchronizes the stream first (no call may be in flight
  /// that still uses the old pointer). Not for this rank itself.
  void set_peer_region(int r, void* region);
  /// Masks r from the next call on (host decision, e.g. the survivors agreed r failed).
  void mask_peer(int r);
  /// Lifts the mask and the failed mark of r (r came back). Synchronizes the stream.
  void unmask_peer(int r);
  /// The worker library reported r's process dead: device waits for r end at once (a
  /// word in mapped host memory the waits poll) and r is masked. Safe while calls run.
  void mark_failed(int r);
  /// Ranks masked as of the last synchronize() (or mask_peer/set_peer_region since).
  std::vector<int> masked() const;

  /// Count kernel (slots per selection, counts per expert, masked ranks dropped), then
  /// the dispatch kernel (FP8 cast or BF16 copy straight into the destination regions;
  /// its last block signals the destinations). x [num_tokens, H] bf16, topk_idx [num_tokens, K] int64 (device).
  /// A token's experts must be distinct: a repeat sends nothing, and synchronize() throws
  /// UsageError (topk_idx must then still hold the call's selections, as combine_recv needs
  /// them anyway, for the message to name both top-k slots).
  void dispatch_send(const uint16_t* x, const int64_t* topk_idx, int num_tokens, const Routing& routing, Format f);
  /// Bounded wait for every live source (one block), then per (local expert, source):
  /// header checks, copy into `out` (device).
  void dispatch_recv(const DispatchOutput& out);
  /// Puts every received row's expert output back to its source region, then signals
  /// (one kernel: its last block signals).
  /// `handle` is the DispatchOutput of the last dispatch (device).
  void combine_send(const uint16_t* expert_out, const DispatchOutput& handle);
  /// Wait kernel then the weighted-sum kernel: out [num_tokens, H] bf16 (device).
  void combine_recv(const int64_t* topk_idx, const float* topk_weights, int num_tokens, uint16_t* out);

  /// Called by synchronize() while it waits: returns true when `peer`'s process is known
  /// dead (e.g. progress the UCX worker, then World::peer_failed(peer)).
  using PeerFailedPoll = std::function<bool(int peer)>;
  /// Waits for the stream, polling `peer_failed` for every live peer (a dead one is
  /// marked failed, which ends the device's wait for it at once). The wait is bounded:
  /// the device waits end after the timeout, and the host gives up after twice the
  /// timeout plus 30 s with TimeoutError (a hung GPU). Then throws, in this order:
  /// UsageError for a token that selects one expert twice; Error for a corrupt message or
  /// handle; PeerFailureError when every rank the device waited
  /// for in vain is known failed; PeerTimeoutError naming the silent ranks. Reported
  /// ranks stay masked.
  void synchronize(const PeerFailedPoll& peer_failed = {});

 private:
  void check_rank(int r, const char* what) const;
  void release() noexcept;
  void upload_active(const Routing& routing);
  /// The device found a repeated expert in the last dispatch's topk_idx: throws the
  /// UsageError of the host backend's check (check_distinct_experts).
  [[noreturn]] void throw_duplicate_expert(int token, int64_t expert) const;
  /// The device state of the peers, as every kernel of a call gets it.
  detail::PeerState peer_state() const;
  Shape shape_;
  int rank_;
  int num_peers_;
  std::chrono::milliseconds timeout_;
  RegionLayout layout_;
  uint64_t epoch_ = 0;
  Routing routing_;
  Format format_ = Format::kFP8;
  const int64_t* topk_idx_ = nullptr;  // of the last dispatch (device), for its error message
  int num_tokens_ = 0;
  Stream stream_ = nullptr;
  std::vector<void*> peer_regions_;
  std::vector<uint8_t> host_mask_;  // mirror of the device mask as of the last sync
  std::vector<uint8_t> uploaded_active_;
  bool active_valid_ = false;
  // device scratch and state
  void** d_regions_ = nullptr;     // [num_peers]
  uint8_t* d_active_ = nullptr;    // [max_ranks] routing flags of the call
  uint8_t* d_live_ = nullptr;      // [max_ranks] active && !mask, per call
  int32_t* d_mask_ = nullptr;      // [max_ranks] persists across calls
  int32_t* d_status_ = nullptr;    // DeviceError (5 words), then missing [max_ranks]
  int32_t* d_slot_ = nullptr;      // [T*K] slot of each selection, -1 = dropped
  int32_t* d_counts_ = nullptr;    // [max_ranks*E] messages per global expert
  int32_t* d_counters_ = nullptr;  // [2 + E] block counters of the fused kernels (cuda_kernels.hpp)
  // pinned host memory
  int32_t* h_failed_ = nullptr;  // [max_ranks] mapped: host writes, device waits poll
  int32_t* d_failed_ = nullptr;  // its device address
  uint8_t* h_stage_ = nullptr;   // staging of small uploads and the status read-back
};

}  // namespace hyrun::ep::cuda
