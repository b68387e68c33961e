// EP CUDA kernels. Every per-value operation is a shared function of per_token.hpp.
//
// Ordering across processes (peers' regions are CUDA IPC mappings; the references do
// the same): data stores, then a system-scope fence and a *release* store of the epoch
// word at system scope (signal kernel); the receiver spins with *acquire* loads at
// system scope and reads the data only after its acquire saw the epoch (in the same
// block, after a block barrier, or in a later kernel of the stream).
#include <cuda/atomic>
#include <cuda_runtime.h>

#include "cuda_kernels.hpp"
#include "hyrun/ep/per_token.hpp"

namespace hyrun::ep::cuda::detail {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxTopkDev = 32;
// 16-byte loads each thread keeps in flight in the row copies (the memory system needs
// several outstanding requests per thread to stay busy; one at a time leaves it idle).
constexpr int kLoadsInFlight = 4;

using SysU64 = ::cuda::atomic_ref<unsigned long long, ::cuda::thread_scope_system>;
using SysI32 = ::cuda::atomic_ref<int32_t, ::cuda::thread_scope_system>;

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ bool is_live(const PeerState& ps, int r) { return ps.live[r] != 0 && ps.mask[r] == 0; }

__device__ __forceinline__ bool error_set(const PeerState& ps) {
  return ::cuda::atomic_ref<int32_t, ::cuda::thread_scope_device>(ps.error->code).load(::cuda::memory_order_acquire) !=
         kErrNone;
}

/// Records the first error (later ones are dropped: the first is the one to report).
__device__ void raise_error(const PeerState& ps, int32_t code, int32_t src, int32_t row, int32_t value) {
  if (atomicCAS(&ps.error->claim, 0, 1) == 0) {
    ps.error->src = src;
    ps.error->row = row;
    ps.error->value = value;
    ::cuda::atomic_ref<int32_t, ::cuda::thread_scope_device>(ps.error->code).store(code, ::cuda::memory_order_release);
  }
}

/// Spins until the epoch word at `word` reaches `epoch`, the host marks `src` failed, or
/// the timeout passes. Returns true when the signal arrived (acquire: the data written
/// before the signal is visible to this thread).
__device__ bool wait_signal(const PeerState& ps, unsigned long long* word, int src, unsigned long long epoch,
                            unsigned long long timeout_ns) {
  const unsigned long long start = global_ns();
  SysU64 w(*word);
  SysI32 failed(ps.failed[src]);
  for (;;) {
    if (w.load(::cuda::memory_order_acquire) >= epoch) return true;
    if (failed.load(::cuda::memory_order_relaxed) != 0 || global_ns() - start > timeout_ns) break;
    __nanosleep(128);
  }
  // Masked from now on: this backend neither signals nor reads the rank until the host
  // unmasks it (a replaced peer), so a slow peer's late data is never taken for new data.
  ps.mask[src] = 1;
  ps.missing[src] = 1;
  return false;
}

/// Copies `nvec` 16-byte words, one warp, kLoadsInFlight loads outstanding per lane.
__device__ __forceinline__ void copy_row16(uint4* __restrict__ dst, const uint4* __restrict__ src, int nvec, int lane) {
  for (int base = lane; base < nvec; base += 32 * kLoadsInFlight) {
    uint4 v[kLoadsInFlight];
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u)
      if (base + u * 32 < nvec) v[u] = src[base + u * 32];
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u)
      if (base + u * 32 < nvec) dst[base + u * 32] = v[u];
  }
}

// live flags (first warp), then one warp per global expert: numbers the kept selections
// of that expert in (token, k) order (the host backend's order) and counts them.
__global__ void count_kernel(Params p, PeerState ps, const int64_t* idx, int num_tokens, int32_t* slot,
                             int32_t* counts) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Every block computes the flags it uses itself (no grid-wide sync needed); block 0
  // also stores them for the later kernels of the call.
  __shared__ uint8_t live[1024];
  for (int r = threadIdx.x; r < p.max_ranks; r += blockDim.x) {
    const uint8_t v = r < p.num_ranks && ps.active[r] != 0 && ps.mask[r] == 0 ? 1 : 0;
    if (r < 1024) live[r] = v;
    if (blockIdx.x == 0) ps.live[r] = v;
  }
  __syncthreads();
  const int g = blockIdx.x * kWarps + warp;
  if (g >= p.num_ranks * p.E) return;
  const int n = num_tokens * p.K;
  int base = 0;
  for (int start = 0; start < n; start += 32) {
    const int f = start + lane;
    const bool match = f < n && mask_expert(idx[f], p.E, p.num_ranks, live) == g;
    const unsigned ballot = __ballot_sync(0xffffffffu, match);
    if (match) {
      const int s = base + __popc(ballot & ((1u << lane) - 1u));
      slot[f] = s < p.T ? s : -1;  // > T only with repeated experts in a token: dropped
    }
    base += __popc(ballot);
  }
  if (lane == 0) counts[g] = base < p.T ? base : p.T;
}

__device__ __forceinline__ unsigned char* message_ptr(const Params& p, void* const* regions, int64_t g, int s) {
  const int dst = static_cast<int>(g / p.E), e = static_cast<int>(g % p.E);
  const unsigned long long row = (static_cast<unsigned long long>(e) * p.max_ranks + p.rank) * p.T + s;
  return static_cast<unsigned char*>(regions[dst]) + p.off_dispatch + row * p.slot_bytes;
}

// FP8 cast of one 128-channel block by one warp: 4 channels per lane. Returns the packed
// codes of this lane's 4 channels; *scale gets the block's scale.
__device__ __forceinline__ uint32_t cast_block_fp8(const uint16_t* xb, int lane, float* scale) {
  const uint2 raw = *reinterpret_cast<const uint2*>(xb + lane * 4);
  const uint16_t v[4] = {static_cast<uint16_t>(raw.x & 0xffffu), static_cast<uint16_t>(raw.x >> 16),
                         static_cast<uint16_t>(raw.y & 0xffffu), static_cast<uint16_t>(raw.y >> 16)};
  float amax = 0.0f;
  for (int i = 0; i < 4; ++i) amax = ep_max(amax, ep_abs(bf16_to_float(v[i])));
  for (int off = 16; off > 0; off >>= 1) amax = ep_max(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  const float mult = fp8_quant_multiplier(amax);
  *scale = fp8_scale_for_amax(amax);
  uint32_t packed = 0;
  for (int i = 0; i < 4; ++i) packed |= static_cast<uint32_t>(quantize_fp8(v[i], mult)) << (8 * i);
  return packed;
}

// One block per token: casts the row once and writes it to every kept selection's slot
// in the destination rank's region (slot < 0: dropped or masked, see count_kernel).
__global__ void dispatch_kernel(Params p, void* const* regions, const uint16_t* x, const int64_t* idx,
                                const int32_t* slot) {
  __shared__ unsigned char* msgs[kMaxTopkDev];
  const int i = blockIdx.x;
  if (threadIdx.x < p.K) {
    const int f = i * p.K + threadIdx.x;
    const int s = slot[f];
    unsigned char* m = nullptr;
    if (s >= 0) {
      m = message_ptr(p, regions, idx[f], s);
      // MessageHeader {src_token, src_topk, src_rank, magic} as one 16-byte store
      *reinterpret_cast<int4*>(m) =
          make_int4(i, static_cast<int>(threadIdx.x), p.rank,
                    static_cast<int>(message_magic(static_cast<uint32_t>(kMessageMagic), p.fp8, p.epoch)));
    }
    msgs[threadIdx.x] = m;
  }
  __syncthreads();
  const uint16_t* row = x + static_cast<size_t>(i) * p.H;
  if (p.fp8) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int b = warp; b < p.H / kScaleBlock; b += kWarps) {
      float scale;
      const uint32_t q = cast_block_fp8(row + b * kScaleBlock, lane, &scale);
      for (int k = 0; k < p.K; ++k) {
        unsigned char* m = msgs[k];
        if (m == nullptr) continue;
        *reinterpret_cast<uint32_t*>(m + kMessageHeaderBytes + b * kScaleBlock + lane * 4) = q;
        if (lane == 0) *reinterpret_cast<float*>(m + kMessageHeaderBytes + p.H + b * 4) = scale;
      }
    }
  } else {
    const int nvec = p.H / 8;
    for (int v = threadIdx.x; v < nvec; v += blockDim.x) {
      const uint4 val = reinterpret_cast<const uint4*>(row)[v];
      for (int k = 0; k < p.K; ++k)
        if (msgs[k] != nullptr) reinterpret_cast<uint4*>(msgs[k] + kMessageHeaderBytes)[v] = val;
    }
  }
}

// Per live destination: (counts,) system fence, release store of the epoch word. Nothing
// is signalled once an error is set: the peers then time out instead of reading garbage.
__global__ void signal_kernel(Params p, PeerState ps, void* const* regions, const int32_t* counts,
                              unsigned long long off_sig) {
  if (error_set(ps)) return;
  for (int r = threadIdx.x; r < p.num_ranks; r += blockDim.x) {
    if (!is_live(ps, r)) continue;
    unsigned char* base = static_cast<unsigned char*>(regions[r]);
    if (counts != nullptr) {
      int32_t* c = reinterpret_cast<int32_t*>(base + p.off_counts) + p.rank * p.E;
      for (int e = 0; e < p.E; ++e) c[e] = counts[r * p.E + e];
    }
    // The data of the previous kernels of the stream (complete at this kernel's start)
    // and the counts above, then the epoch: fence + release at system scope.
    __threadfence_system();
    SysU64(*reinterpret_cast<unsigned long long*>(base + off_sig + 8ull * p.rank))
        .store(p.epoch, ::cuda::memory_order_release);
  }
}

// One block per (local expert, source rank < num_ranks): thread 0 waits for the source's
// dispatch signal (acquire), then the block checks every header and copies the rows.
__global__ void unpack_kernel(Params p, PeerState ps, void* own, DevOut out) {
  const int e = blockIdx.x / p.num_ranks, src = blockIdx.x % p.num_ranks;
  unsigned char* region = static_cast<unsigned char*>(own);
  __shared__ int n_shared;
  if (threadIdx.x == 0) {
    int n = 0;
    if (is_live(ps, src) &&
        wait_signal(ps, reinterpret_cast<unsigned long long*>(region + p.off_dsig + 8ull * src), src, p.epoch,
                    p.timeout_ns)) {
      n = reinterpret_cast<const int32_t*>(region + p.off_counts)[src * p.E + e];
      n = n < 0 ? 0 : (n > p.T ? p.T : n);
    }
    n_shared = n;
    out.layout_count[e * p.max_ranks + src] = n;
    if (n > 0) atomicAdd(&out.recv_count[e], n);
  }
  __syncthreads();  // orders thread 0's acquire before every thread's reads of the data
  const int n = n_shared;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t magic = static_cast<int32_t>(message_magic(static_cast<uint32_t>(kMessageMagic), p.fp8, p.epoch));
  for (int j = warp; j < n; j += kWarps) {
    const unsigned long long row = (static_cast<unsigned long long>(e) * p.max_ranks + src) * p.T + j;
    const unsigned char* m = region + p.off_dispatch + row * p.slot_bytes;
    const int4 h = *reinterpret_cast<const int4*>(m);  // {src_token, src_topk, src_rank, magic}
    int32_t code = kErrNone, value = 0;
    if (h.w != magic) code = kErrMagic, value = h.w;
    else if (h.z != src) code = kErrSource, value = h.z;
    else if (h.x < 0 || h.x >= p.T) code = kErrToken, value = h.x;
    else if (h.y < 0 || h.y >= p.K) code = kErrTopk, value = h.y;
    if (code != kErrNone) {
      if (lane == 0) raise_error(ps, code, src, static_cast<int32_t>(row), value);
      continue;  // never copied: the host reports the error before anything else is written
    }
    if (lane == 0) {
      out.src_token[row] = h.x;
      out.src_topk[row] = h.y;
    }
    const uint4* payload = reinterpret_cast<const uint4*>(m + kMessageHeaderBytes);
    if (p.fp8) {
      copy_row16(reinterpret_cast<uint4*>(static_cast<unsigned char*>(out.recv_x) + row * p.H), payload, p.H / 16, lane);
      const float* sc = reinterpret_cast<const float*>(m + kMessageHeaderBytes + p.H);
      for (int b = lane; b < p.H / kScaleBlock; b += 32) out.recv_scales[row * (p.H / kScaleBlock) + b] = sc[b];
    } else {
      copy_row16(reinterpret_cast<uint4*>(static_cast<unsigned char*>(out.recv_x) + row * p.H * 2), payload, p.H / 8,
                 lane);
    }
  }
}

// One block per (local expert, source rank < num_ranks): expert output rows back to their
// source. The handle's source token / top-k are checked before they form an address in
// another process's memory; nothing is written once any error is set.
__global__ void combine_send_kernel(Params p, PeerState ps, void* const* regions, const int32_t* layout_count,
                                    const int32_t* src_token, const int32_t* src_topk, const uint16_t* expert_out) {
  const int e = blockIdx.x / p.num_ranks, src = blockIdx.x % p.num_ranks;
  __shared__ int go;
  if (threadIdx.x == 0) go = is_live(ps, src) && !error_set(ps);
  __syncthreads();
  if (!go) return;
  int n = layout_count[e * p.max_ranks + src];
  n = n < 0 ? 0 : (n > p.T ? p.T : n);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int j = warp; j < n; j += kWarps) {
    const unsigned long long row = (static_cast<unsigned long long>(e) * p.max_ranks + src) * p.T + j;
    const int tok = src_token[row], k = src_topk[row];
    if (tok < 0 || tok >= p.T || k < 0 || k >= p.K) {
      if (lane == 0) raise_error(ps, kErrHandle, src, static_cast<int32_t>(row), tok < 0 || tok >= p.T ? tok : k);
      continue;
    }
    const unsigned long long dst_row = static_cast<unsigned long long>(tok) * p.K + k;
    uint4* dst = reinterpret_cast<uint4*>(static_cast<unsigned char*>(regions[src]) + p.off_combine + dst_row * p.H * 2);
    copy_row16(dst, reinterpret_cast<const uint4*>(expert_out + row * p.H), p.H / 8, lane);
  }
}

// Waits (acquire) for every live source's combine signal; a silent one is masked.
__global__ void combine_wait_kernel(Params p, PeerState ps, void* own) {
  unsigned char* region = static_cast<unsigned char*>(own);
  for (int r = threadIdx.x; r < p.num_ranks; r += blockDim.x)
    if (is_live(ps, r))
      wait_signal(ps, reinterpret_cast<unsigned long long*>(region + p.off_csig + 8ull * r), r, p.epoch, p.timeout_ns);
}

// One block per token: out = sum over kept k of w_k * row_k (combine_channel).
__global__ void combine_reduce_kernel(Params p, PeerState ps, const void* own, const int64_t* idx,
                                      const float* weights, uint16_t* out) {
  __shared__ const uint16_t* rows[kMaxTopkDev];
  __shared__ float w[kMaxTopkDev];
  const int i = blockIdx.x;
  const uint16_t* data = reinterpret_cast<const uint16_t*>(static_cast<const unsigned char*>(own) + p.off_combine);
  if (threadIdx.x < p.K) {
    const int f = i * p.K + threadIdx.x;
    const int64_t g = mask_expert(idx[f], p.E, p.num_ranks, ps.live);
    rows[threadIdx.x] = g >= 0 && ps.mask[g / p.E] == 0 ? data + static_cast<size_t>(f) * p.H : nullptr;
    w[threadIdx.x] = weights[f];
  }
  __syncthreads();
  for (int c = threadIdx.x; c < p.H; c += blockDim.x)
    out[static_cast<size_t>(i) * p.H + c] = combine_channel(rows, w, p.K, c);
}

__global__ void cast_fp8_kernel(const uint16_t* x, int H, uint8_t* q, float* scales) {
  const int r = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int b = warp; b < H / kScaleBlock; b += kWarps) {
    float scale;
    const uint32_t packed = cast_block_fp8(x + static_cast<size_t>(r) * H + b * kScaleBlock, lane, &scale);
    *reinterpret_cast<uint32_t*>(q + static_cast<size_t>(r) * H + b * kScaleBlock + lane * 4) = packed;
    if (lane == 0) scales[static_cast<size_t>(r) * (H / kScaleBlock) + b] = scale;
  }
}

}  // namespace

cudaError_t launch_count(const Params& p, const PeerState& peers, const int64_t* idx, int num_tokens, int32_t* slot,
                         int32_t* counts, cudaStream_t s) {
  if (p.max_ranks > 1024) return cudaErrorInvalidValue;  // the live flags' shared array
  const int experts = p.num_ranks * p.E;
  count_kernel<<<(experts + kWarps - 1) / kWarps, kThreads, 0, s>>>(p, peers, idx, num_tokens, slot, counts);
  return cudaGetLastError();
}
cudaError_t launch_dispatch(const Params& p, void* const* regions, const uint16_t* x, const int64_t* idx,
                            const int32_t* slot, int num_tokens, cudaStream_t s) {
  if (num_tokens > 0) dispatch_kernel<<<num_tokens, kThreads, 0, s>>>(p, regions, x, idx, slot);
  return cudaGetLastError();
}
cudaError_t launch_signal(const Params& p, const PeerState& peers, void* const* regions, const int32_t* counts,
                          unsigned long long off_sig, cudaStream_t s) {
  signal_kernel<<<1, 128, 0, s>>>(p, peers, regions, counts, off_sig);
  return cudaGetLastError();
}
cudaError_t launch_unpack(const Params& p, const PeerState& peers, void* own, const DevOut& out, cudaStream_t s) {
  // Sources >= num_ranks get no block: their layout counts are zeroed here.
  cudaError_t err = cudaMemsetAsync(out.layout_count, 0, sizeof(int32_t) * p.E * p.max_ranks, s);
  if (err == cudaSuccess) err = cudaMemsetAsync(out.recv_count, 0, sizeof(int32_t) * p.E, s);
  if (err != cudaSuccess) return err;
  unpack_kernel<<<p.E * p.num_ranks, kThreads, 0, s>>>(p, peers, own, out);
  return cudaGetLastError();
}
cudaError_t launch_combine_send(const Params& p, const PeerState& peers, void* const* regions,
                                const int32_t* layout_count, const int32_t* src_token, const int32_t* src_topk,
                                const uint16_t* expert_out, cudaStream_t s) {
  combine_send_kernel<<<p.E * p.num_ranks, kThreads, 0, s>>>(p, peers, regions, layout_count, src_token, src_topk,
                                                             expert_out);
  return cudaGetLastError();
}
cudaError_t launch_combine_wait(const Params& p, const PeerState& peers, void* own, cudaStream_t s) {
  combine_wait_kernel<<<1, 128, 0, s>>>(p, peers, own);
  return cudaGetLastError();
}
cudaError_t launch_combine_reduce(const Params& p, const PeerState& peers, const void* own, const int64_t* idx,
                                  const float* weights, int num_tokens, uint16_t* out, cudaStream_t s) {
  if (num_tokens > 0) combine_reduce_kernel<<<num_tokens, kThreads, 0, s>>>(p, peers, own, idx, weights, out);
  return cudaGetLastError();
}
cudaError_t launch_cast_fp8(const uint16_t* x, int rows, int H, uint8_t* q, float* scales, cudaStream_t s) {
  if (rows > 0) cast_fp8_kernel<<<rows, kThreads, 0, s>>>(x, H, q, scales);
  return cudaGetLastError();
}

}  // namespace hyrun::ep::cuda::detail
