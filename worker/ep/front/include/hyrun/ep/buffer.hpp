#pragma once
// The EP front (library hyrun_ep_front), like DeepEP's Buffer: one object per rank that
// owns the backend and its transport, allocated once for the largest shape and world,
// with attach/detach of peers for elastic jobs. Programs (ep-check, ep-bench-host,
// ep-bench-gpu, ep-bench) use only this class for dispatch and combine.
//
//   Backend           transport                                   tensors of the calls
//   kHost             UcxTransport (puts into ucp_mem_map'ed      host memory
//                     regions)
//   kCudaIpc          CUDA IPC: kernels store into the peers'     device memory
//                     regions (one node)
//   kCudaStaged       device tensors staged through pinned host   device memory
//                     memory, moved by the host backend over
//                     UcxTransport (--disable-ll-nvlink; several
//                     nodes)
//
// Contract:
//  * Construction with PeerAttach::kCollective is collective (every rank of the World):
//    region descriptors are exchanged with World::allgatherv. With kDeferred nothing is
//    exchanged: the caller passes local_descriptor() to its peers and calls attach_peer
//    for each (elastic jobs, restarted ranks).
//  * dispatch()/combine() return when the outputs are complete and checked; they throw
//    PeerFailureError (a peer known dead: at once, from the worker library), or
//    PeerTimeoutError (a peer silent past the timeout), or Error (corrupt data). After
//    either peer error, the caller masks the ranks in Routing::active, detach_peer()s
//    them, agrees on a new epoch (set_epoch) with the other survivors and goes on.
//  * launch_dispatch()/launch_combine() + synchronize() are the same calls split (CUDA:
//    the launches are asynchronous on stream(), so that events can bracket them).
//  * For the CUDA backends the caller must have selected the rank's GPU
//    (select_cuda_device) before constructing the Buffer.
//  * Teardown: a CUDA IPC owner must not free its region while a peer still maps it.
//    So programs call close_peers() (every peer mapping closed; no more calls), then wait
//    until every rank that mapped this rank's region did the same (a barrier, or the
//    elastic coordinator's "closed"/"free" messages), then destroy the Buffer, which
//    frees the region. The destructor alone also closes the mappings before freeing.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hyrun/ep/host_backend.hpp"
#include "hyrun/ep/layout.hpp"
#include "hyrun/ep/ucx_transport.hpp"
#include "hyrun/worker.hpp"

struct CUstream_st;

namespace hyrun::ep {

enum class Backend { kHost, kCudaIpc, kCudaStaged };
const char* to_string(Backend b);  ///< "host/ucx", "cuda/ipc", "cuda/staged-ucx"
inline bool on_device(Backend b) { return b != Backend::kHost; }

/// True when this build has the CUDA backend (HYRUN_EP_WITH_CUDA).
bool built_with_cuda();
/// Selects this rank's GPU (local rank modulo the visible devices). False, with `why`
/// filled, when the build has no CUDA or no device answers.
bool select_cuda_device(int local_rank, std::string* why);

/// The backend for a --backend value ("host", "cuda", "auto"): auto is CUDA when a GPU
/// answers (select_cuda_device), else host. CUDA is IPC on one node, staged with
/// `disable_ll_nvlink` or across nodes. Throws UsageError for "cuda" without a usable
/// GPU, naming why (no device, a build without CUDA), and for unknown names.
Backend choose_backend(const std::string& name, bool disable_ll_nvlink, const World& world);
/// The same for a rank of `num_nodes` nodes with this local rank.
Backend choose_backend(const std::string& name, bool disable_ll_nvlink, int local_rank, int num_nodes);

struct BufferOptions {
  Shape shape;  ///< largest shape; max_ranks = largest world
  Backend backend = Backend::kHost;
  std::chrono::milliseconds timeout{30000};     ///< longest wait for a peer's data
  PeerAttach attach = PeerAttach::kCollective;  ///< kDeferred: peers attached one by one
};

class Buffer {
 public:
  Buffer(World& world, const BufferOptions& options);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  Backend backend() const;
  const char* name() const { return to_string(backend()); }
  /// The shape of the calls now (<= the construction shape; see rearm).
  const Shape& shape() const;
  /// CUDA backends: the stream of all the Buffer's GPU work; nullptr for kHost.
  CUstream_st* stream() const;

  // ---------------------------------------------------------------- elastic jobs
  /// This rank's region descriptor (UCX rkey and/or CUDA IPC handle), for the peers.
  std::vector<std::byte> local_descriptor() const;
  /// Connects to `peer`'s region (replacing an older one: a restarted peer). With a
  /// World::replace_peer for the peer, call that first.
  void attach_peer(int peer, std::span<const std::byte> descriptor);
  /// Forgets `peer`'s region: nothing is written to or read from it any more.
  void detach_peer(int peer);

  uint64_t epoch() const;
  /// Same meaning as HostBackend::set_epoch (agreed by every rank of the next call).
  void set_epoch(uint64_t epoch);

  /// Collective (every rank of the World): barrier, zero this rank's region for `shape`
  /// (must fit in the construction shape), barrier, fresh backend state with `timeout`
  /// (masks cleared, epoch 0). ep-check re-arms for each test shape.
  void rearm(const Shape& shape, std::chrono::milliseconds timeout);

  // ---------------------------------------------------------------- calls
  /// Tensors in device memory for the CUDA backends, host memory for kHost.
  void dispatch(const uint16_t* x, const int64_t* topk_idx, int num_tokens, const Routing& routing, Format f,
                const DispatchOutput& out) {
    launch_dispatch(x, topk_idx, num_tokens, routing, f, out);
    synchronize();
  }
  void combine(const uint16_t* expert_out, const DispatchOutput& handle, const int64_t* topk_idx,
               const float* topk_weights, int num_tokens, uint16_t* out) {
    launch_combine(expert_out, handle, topk_idx, topk_weights, num_tokens, out);
    synchronize();
  }
  void launch_dispatch(const uint16_t* x, const int64_t* topk_idx, int num_tokens, const Routing& routing, Format f,
                       const DispatchOutput& out);
  void launch_combine(const uint16_t* expert_out, const DispatchOutput& handle, const int64_t* topk_idx,
                      const float* topk_weights, int num_tokens, uint16_t* out);
  /// kHost: recv_x / recv_scales of format `f` as views of this rank's region, where the
  /// peers store the rows (HostBackend::region_rows: no copy on receipt; valid until this
  /// rank's next combine; fetch again after rearm). UsageError for the CUDA backends.
  RegionRows region_rows(Format f);
  /// Waits for the launched calls (bounded) and throws what they found (see above).
  void synchronize();

  /// Closes every peer mapping (CUDA IPC; the stream is synchronized first) and ends the
  /// Buffer's calls (later ones throw UsageError). See "Teardown" above.
  void close_peers();

  // ---------------------------------------------------------------- tests
  /// Fills this rank's whole region with `value` (masked-round witness).
  void fill_region(uint8_t value);
  /// Bytes of this rank's region that differ from `value`.
  std::size_t region_bytes_not(uint8_t value);

  /// The backend-specific part (buffer_path.hpp).
  class Path;

 private:
  std::unique_ptr<Path> path_;
  bool closed_ = false;
  void check_open(const char* what) const;
};

}  // namespace hyrun::ep
