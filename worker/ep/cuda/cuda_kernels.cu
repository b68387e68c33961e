// EP CUDA kernels. Every per-value operation is a shared function of per_token.hpp.
//
// Ordering across processes (peers' regions are CUDA IPC mappings; the references do
// the same): data stores, then a system-scope fence and a *release* store of the epoch
// word at system scope (signal kernel); the receiver spins with *acquire* loads at
// system scope and reads the data only after its acquire saw the epoch (in the same
// block, after a block barrier, or in a later kernel of the stream).
#include <cuda_runtime.h>
#include <cuda/atomic>

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
// Scale blocks one warp of the dispatch kernel loads before it casts them.
constexpr int kCastBatch = 4;
// Selections per shared-memory tile of the count kernel.
constexpr int kCountTile = 2048;

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

// A token's selected experts must be distinct (DeepEP's contract; a repeat would also
// break the slot numbering): the first repeat this thread finds in `sel` (the token's K
// selections, -1 ignored, as check_distinct_experts does) is recorded for synchronize().
// (One warp a token with __match_any_sync cost a 1-rank call 8-19 us on an H200: slower.)
__device__ void check_distinct_experts(const Params& p, const PeerState& ps, const int64_t* sel, int token) {
  for (int k = 1; k < p.K; ++k) {
    const int64_t g = sel[k];
    if (g < 0) continue;
    for (int k2 = 0; k2 < k; ++k2)
      if (sel[k2] == g) {
        raise_error(ps, kErrDuplicateExpert, p.rank, token, static_cast<int32_t>(g));
        return;
      }
  }
}

// live flags (first warp), then one warp per global expert: numbers the kept selections
// of that expert in (token, k) order (the host backend's order) and counts them. Every
// thread also checks a share of the tokens for repeated experts (no host copy or sync:
// synchronize() reports a repeat).
__global__ void count_kernel(Params p, PeerState ps, const int64_t* idx, int num_tokens, int32_t* slot,
                             int32_t* counts) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < num_tokens; i += gridDim.x * blockDim.x)
    check_distinct_experts(p, ps, idx + static_cast<size_t>(i) * p.K, i);
  // Every block computes the flags it uses itself (no grid-wide sync needed); block 0
  // also stores them for the later kernels of the call.
  __shared__ uint8_t live[1024];
  for (int r = threadIdx.x; r < p.max_ranks; r += blockDim.x) {
    const uint8_t v = r < p.num_ranks && ps.active[r] != 0 && ps.mask[r] == 0 ? 1 : 0;
    if (r < 1024) live[r] = v;
    if (blockIdx.x == 0) ps.live[r] = v;
  }
  __syncthreads();
  const int n = num_tokens * p.K;
  const int g = blockIdx.x * kWarps + warp;  // this warp's global expert (may be past the last)
  const bool counts_expert = g < p.num_ranks * p.E;
  // Tiles of selections: the block loads a tile's experts into shared memory (each
  // thread kLoadsInFlight independent loads), then each warp numbers its expert's
  // selections from there with ballots, in (token, k) order (the host backend's order).
  __shared__ int32_t tile[kCountTile];
  int base = 0;
  for (int start = 0; start < n; start += kCountTile) {
    const int len = n - start < kCountTile ? n - start : kCountTile;
    for (int t0 = threadIdx.x; t0 < len; t0 += blockDim.x * kLoadsInFlight) {
      int64_t v[kLoadsInFlight];
#pragma unroll
      for (int u = 0; u < kLoadsInFlight; ++u) {
        const int t = t0 + u * blockDim.x;
        v[u] = t < len ? idx[start + t] : -1;
      }
#pragma unroll
      for (int u = 0; u < kLoadsInFlight; ++u) {
        const int t = t0 + u * blockDim.x;
        if (t >= len) continue;
        const auto e = static_cast<int32_t>(mask_expert(v[u], p.E, p.num_ranks, live));
        tile[t] = e;
        // Selections no expert numbers (invalid, masked or inactive) are dropped here;
        // the others get their slot (or -1 on overflow) from their expert's warp.
        if (e < 0 && blockIdx.x == 0) slot[start + t] = -1;
      }
    }
    __syncthreads();
    if (counts_expert)
      for (int t = lane; t - lane < len; t += 32) {
        const bool match = t < len && tile[t] == g;
        const unsigned ballot = __ballot_sync(0xffffffffu, match);
        if (match) {
          const int s = base + __popc(ballot & ((1u << lane) - 1u));
          slot[start + t] = s < p.T ? s : -1;  // > T only with repeated experts in a token: dropped
        }
        base += __popc(ballot);
      }
    __syncthreads();  // the tile is reused
  }
  if (!counts_expert) return;
  if (lane == 0) counts[g] = base < p.T ? base : p.T;
}

__device__ __forceinline__ unsigned char* message_ptr(const Params& p, void* const* regions, int64_t g, int s) {
  const int dst = static_cast<int>(g / p.E), e = static_cast<int>(g % p.E);
  const unsigned long long row = (static_cast<unsigned long long>(e) * p.max_ranks + p.rank) * p.T + s;
  return static_cast<unsigned char*>(regions[dst]) + p.off_dispatch + row * p.slot_bytes;
}

// Per live destination: (counts,) system fence, release store of the epoch word, by the
// threads of one block. Nothing is signalled once an error is set: the peers then time
// out instead of reading garbage.
__device__ void signal_peers(const Params& p, const PeerState& ps, void* const* regions, const int32_t* counts,
                             unsigned long long off_sig) {
  if (error_set(ps)) return;
  for (int r = threadIdx.x; r < p.num_ranks; r += blockDim.x) {
    if (!is_live(ps, r)) continue;
    unsigned char* base = static_cast<unsigned char*>(regions[r]);
    if (counts != nullptr) {
      int32_t* c = reinterpret_cast<int32_t*>(base + p.off_counts) + p.rank * p.E;
      for (int e = 0; e < p.E; ++e) c[e] = counts[r * p.E + e];
    }
    // Every block's data (fenced by each block before it counted itself done, see
    // last_block_done) and the counts above, then the epoch: fence + release, system scope.
    __threadfence_system();
    SysU64(*reinterpret_cast<unsigned long long*>(base + off_sig + 8ull * p.rank))
        .store(p.epoch, ::cuda::memory_order_release);
  }
}

// True in every thread of the last block of the grid to get here (its stores and those
// of every earlier block are then visible system-wide); resets the counter for the next
// kernel. Called by every thread of every block, once.
__device__ bool last_block_done(int32_t* counter) {
  __shared__ int last;
  __threadfence_system();  // this thread's stores (peer regions) before the count
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(counter, 1) == static_cast<int>(gridDim.x) - 1;
    if (last) {
      *counter = 0;
      __threadfence_system();  // the other blocks' counted stores before the signal
    }
  }
  __syncthreads();
  return last != 0;
}

// FP8 cast of one 128-channel block by one warp, from this lane's 4 channels (`raw`, as
// loaded). Returns their packed codes; *scale gets the block's scale.
__device__ __forceinline__ uint32_t cast_block_fp8_raw(uint2 raw, float* scale) {
  const uint16_t v[4] = {static_cast<uint16_t>(raw.x & 0xffffu), static_cast<uint16_t>(raw.x >> 16),
                         static_cast<uint16_t>(raw.y & 0xffffu), static_cast<uint16_t>(raw.y >> 16)};
  float amax = 0.0f;
  for (int i = 0; i < 4; ++i) amax = ep_max(amax, ep_abs(bf16_to_float(v[i])));
  for (int off = 16; off > 0; off >>= 1) amax = ep_max(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  const float mult = fp8_quant_multiplier(amax);
  *scale = fp8_scale_for_amax(amax);
  // Two values per conversion instruction (floats_to_fp8x2_e4m3).
  return static_cast<uint32_t>(quantize_fp8x2(v[0], v[1], mult)) |
         (static_cast<uint32_t>(quantize_fp8x2(v[2], v[3], mult)) << 16);
}
__device__ __forceinline__ uint32_t cast_block_fp8(const uint16_t* xb, int lane, float* scale) {
  return cast_block_fp8_raw(*reinterpret_cast<const uint2*>(xb + lane * 4), scale);
}

// One block per token: casts the row once and writes it to every kept selection's slot
// in the destination rank's region (slot < 0: dropped or masked, see count_kernel).
// Nothing is written once an error is set (a repeated expert, found by the count kernel).
__global__ void dispatch_kernel(Params p, PeerState ps, void* const* regions, const uint16_t* x, const int64_t* idx,
                                const int32_t* slot, const int32_t* counts, int parts) {
  __shared__ unsigned char* msgs[kMaxTopkDev];
  __shared__ int stop;
  if (threadIdx.x == 0) stop = error_set(ps);
  __syncthreads();
  // `parts` blocks per token, each a share of its channels; part 0 writes the headers.
  const int i = blockIdx.x / parts, part = blockIdx.x % parts;
  if (threadIdx.x < p.K) {
    const int f = i * p.K + threadIdx.x;
    const int s = slot[f];
    unsigned char* m = nullptr;
    if (s >= 0 && !stop) {
      m = message_ptr(p, regions, idx[f], s);
      // MessageHeader {src_token, src_topk, src_rank, magic} as one 16-byte store
      if (part == 0)
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
    const int blocks = p.H / kScaleBlock;
    // This warp's scale blocks, kCastBatch at a time: their loads are issued together
    // (one at a time left the cast latency-bound: 11 us for 128 rows of 7168).
    const int stride = kWarps * parts;  // warps of this token's blocks
    for (int b0 = part * kWarps + warp; b0 < blocks; b0 += stride * kCastBatch) {
      uint2 raw[kCastBatch];
#pragma unroll
      for (int u = 0; u < kCastBatch; ++u) {
        const int b = b0 + u * stride;
        if (b < blocks) raw[u] = *reinterpret_cast<const uint2*>(row + b * kScaleBlock + lane * 4);
      }
#pragma unroll
      for (int u = 0; u < kCastBatch; ++u) {
        const int b = b0 + u * stride;
        if (b >= blocks) continue;
        float scale;
        const uint32_t q = cast_block_fp8_raw(raw[u], &scale);
        for (int k = 0; k < p.K; ++k) {
          unsigned char* m = msgs[k];
          if (m == nullptr) continue;
          *reinterpret_cast<uint32_t*>(m + kMessageHeaderBytes + b * kScaleBlock + lane * 4) = q;
          if (lane == 0) *reinterpret_cast<float*>(m + kMessageHeaderBytes + p.H + b * 4) = scale;
        }
      }
    }
  } else {
    const int nvec = p.H / 8;
    for (int v = part * blockDim.x + threadIdx.x; v < nvec; v += parts * blockDim.x) {
      const uint4 val = reinterpret_cast<const uint4*>(row)[v];
      for (int k = 0; k < p.K; ++k)
        if (msgs[k] != nullptr) reinterpret_cast<uint4*>(msgs[k] + kMessageHeaderBytes)[v] = val;
    }
  }
  if (last_block_done(&ps.counters[0])) signal_peers(p, ps, regions, counts, p.off_dsig);
}

// The signal alone (a dispatch of no tokens has no blocks to signal from).
__global__ void signal_kernel(Params p, PeerState ps, void* const* regions, const int32_t* counts,
                              unsigned long long off_sig) {
  signal_peers(p, ps, regions, counts, off_sig);
}

// `chunks` blocks per (local expert, source rank < num_ranks), after wait_signals_kernel
// (the sources' dispatch signals, none in a call of one rank; a silent source is masked by then): the block checks
// the headers of its share of the rows (every chunks-th group of kWarps rows) and copies
// them. Chunk 0 writes the counts.
__global__ void unpack_kernel(Params p, PeerState ps, void* own, DevOut out, int chunks) {
  const int pair = blockIdx.x / chunks, chunk = blockIdx.x % chunks;
  const int e = pair / p.num_ranks, src = pair % p.num_ranks;
  unsigned char* region = static_cast<unsigned char*>(own);
  __shared__ int n_shared;
  if (threadIdx.x == 0) {
    int n = 0;
    if (is_live(ps, src) && !error_set(ps)) {  // (an error: the wait did not run)
      n = reinterpret_cast<const int32_t*>(region + p.off_counts)[src * p.E + e];
      n = n < 0 ? 0 : (n > p.T ? p.T : n);
    }
    n_shared = n;
    if (chunk == 0) {
      out.layout_count[e * p.max_ranks + src] = n;
      // The last source of expert e to be counted sums them all: recv_count needs no
      // zeroing beforehand, and the sources >= num_ranks get their zero here.
      __threadfence();
      if (atomicAdd(&ps.counters[2 + e], 1) == p.num_ranks - 1) {
        __threadfence();
        int total = 0;
        for (int r = 0; r < p.num_ranks; ++r)
          total += ::cuda::atomic_ref<int32_t, ::cuda::thread_scope_device>(out.layout_count[e * p.max_ranks + r])
                       .load(::cuda::memory_order_relaxed);
        for (int r = p.num_ranks; r < p.max_ranks; ++r) out.layout_count[e * p.max_ranks + r] = 0;
        out.recv_count[e] = total;
        ps.counters[2 + e] = 0;
      }
    }
  }
  __syncthreads();
  const int n = n_shared;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t magic = static_cast<int32_t>(message_magic(static_cast<uint32_t>(kMessageMagic), p.fp8, p.epoch));
  for (int j = chunk * kWarps + warp; j < n; j += chunks * kWarps) {
    const unsigned long long row = (static_cast<unsigned long long>(e) * p.max_ranks + src) * p.T + j;
    const unsigned char* m = region + p.off_dispatch + row * p.slot_bytes;
    const int4 h = *reinterpret_cast<const int4*>(m);  // {src_token, src_topk, src_rank, magic}
    int32_t code = kErrNone, value = 0;
    if (h.w != magic)
      code = kErrMagic, value = h.w;
    else if (h.z != src)
      code = kErrSource, value = h.z;
    else if (h.x < 0 || h.x >= p.T)
      code = kErrToken, value = h.x;
    else if (h.y < 0 || h.y >= p.K)
      code = kErrTopk, value = h.y;
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
      copy_row16(reinterpret_cast<uint4*>(static_cast<unsigned char*>(out.recv_x) + row * p.H), payload, p.H / 16,
                 lane);
      const float* sc = reinterpret_cast<const float*>(m + kMessageHeaderBytes + p.H);
      for (int b = lane; b < p.H / kScaleBlock; b += 32) out.recv_scales[row * (p.H / kScaleBlock) + b] = sc[b];
    } else {
      copy_row16(reinterpret_cast<uint4*>(static_cast<unsigned char*>(out.recv_x) + row * p.H * 2), payload, p.H / 8,
                 lane);
    }
  }
}

// `chunks` blocks per (local expert, source rank < num_ranks): expert output rows back to
// their source. The handle's source token / top-k are checked before they form an address
// in another process's memory; nothing is written once any error is set.
__global__ void combine_send_kernel(Params p, PeerState ps, void* const* regions, const int32_t* layout_count,
                                    const int32_t* src_token, const int32_t* src_topk, const uint16_t* expert_out,
                                    int chunks) {
  const int pair = blockIdx.x / chunks, chunk = blockIdx.x % chunks;
  const int e = pair / p.num_ranks, src = pair % p.num_ranks;
  __shared__ int go;
  if (threadIdx.x == 0) go = is_live(ps, src) && !error_set(ps);
  __syncthreads();
  int n = go ? layout_count[e * p.max_ranks + src] : 0;  // every block counts itself done below
  n = n < 0 ? 0 : (n > p.T ? p.T : n);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int j = chunk * kWarps + warp; j < n; j += chunks * kWarps) {
    const unsigned long long row = (static_cast<unsigned long long>(e) * p.max_ranks + src) * p.T + j;
    const int tok = src_token[row], k = src_topk[row];
    if (tok < 0 || tok >= p.T || k < 0 || k >= p.K) {
      if (lane == 0) raise_error(ps, kErrHandle, src, static_cast<int32_t>(row), tok < 0 || tok >= p.T ? tok : k);
      continue;
    }
    const unsigned long long dst_row = static_cast<unsigned long long>(tok) * p.K + k;
    uint4* dst =
        reinterpret_cast<uint4*>(static_cast<unsigned char*>(regions[src]) + p.off_combine + dst_row * p.H * 2);
    copy_row16(dst, reinterpret_cast<const uint4*>(expert_out + row * p.H), p.H / 8, lane);
  }
  if (last_block_done(&ps.counters[1])) signal_peers(p, ps, regions, nullptr, p.off_csig);
}

// Waits (acquire) for every live source's signal at `off_sig` (dispatch or combine); a
// silent one is masked. One block: the kernel after it on the stream reads what arrived
// with every block busy copying. (Unpack blocks that each waited for their source held
// SMs that the peers' dispatch kernels, the ones waited for, needed, so their number had
// to be held down when processes share a GPU.)
__global__ void wait_signals_kernel(Params p, PeerState ps, void* own, unsigned long long off_sig) {
  // An error of this call (a repeated expert, a corrupt message) was set by an earlier
  // kernel: this rank sent or signalled nothing since, not even to itself, so nothing is
  // waited for and nobody is masked; synchronize() reports the error.
  if (error_set(ps)) return;
  unsigned char* region = static_cast<unsigned char*>(own);
  for (int r = threadIdx.x; r < p.num_ranks; r += blockDim.x)
    if (is_live(ps, r))
      wait_signal(ps, reinterpret_cast<unsigned long long*>(region + off_sig + 8ull * r), r, p.epoch, p.timeout_ns);
}

// One block per token: out = sum over kept k of w_k * row_k. Each thread reduces 8
// channels at once from 16-byte loads (up to 8 rows in flight); per channel, the same
// steps in the same k order as combine_channel (per_token.hpp), so the result is the
// host backend's bit for bit. H is a multiple of 128 (Shape::validate).
__global__ void combine_reduce_kernel(Params p, PeerState ps, const void* own, const int64_t* idx, const float* weights,
                                      uint16_t* out) {
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
  constexpr int kGroup = 8;  // rows loaded before they are accumulated
  for (int c8 = threadIdx.x; c8 < p.H / 8; c8 += blockDim.x) {
    float acc[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] = 0.0f;
    for (int k0 = 0; k0 < p.K; k0 += kGroup) {
      uint4 v[kGroup];
#pragma unroll
      for (int u = 0; u < kGroup; ++u)
        if (k0 + u < p.K && rows[k0 + u] != nullptr) v[u] = reinterpret_cast<const uint4*>(rows[k0 + u])[c8];
#pragma unroll
      for (int u = 0; u < kGroup; ++u) {
        if (k0 + u >= p.K || rows[k0 + u] == nullptr) continue;
        const uint32_t words[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const auto val = static_cast<uint16_t>(j % 2 == 0 ? words[j / 2] & 0xffffu : words[j / 2] >> 16);
          acc[j] = combine_accumulate(acc[j], val, w[k0 + u]);
        }
      }
    }
    uint32_t packed[4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
      packed[j] = static_cast<uint32_t>(float_to_bf16(acc[2 * j])) |
                  (static_cast<uint32_t>(float_to_bf16(acc[2 * j + 1])) << 16);
    reinterpret_cast<uint4*>(out + static_cast<size_t>(i) * p.H)[c8] =
        make_uint4(packed[0], packed[1], packed[2], packed[3]);
  }
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

// Every float, each once as the low and once as the high value of a pair (u with ~u):
// floats_to_fp8x2_e4m3 (the conversion the kernels use) against float_to_fp8_e4m3 (the
// software reference the host backend's cast is proven equal to).
__global__ void fp8_conversion_check_kernel(unsigned long long* mismatches, uint32_t* first) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  unsigned long long bad = 0;
  for (unsigned long long u = blockIdx.x * blockDim.x + threadIdx.x; u < (1ull << 32); u += stride) {
    const auto lo = static_cast<uint32_t>(u), hi = ~lo;
    const uint16_t got = floats_to_fp8x2_e4m3(bits_float(lo), bits_float(hi));
    const auto want = static_cast<uint16_t>(float_to_fp8_e4m3(bits_float(lo)) |
                                            (static_cast<uint16_t>(float_to_fp8_e4m3(bits_float(hi))) << 8));
    if (got != want) {
      ++bad;
      atomicMin(first, (got & 0xffu) != (want & 0xffu) ? lo : hi);
    }
  }
  if (bad) atomicAdd(mismatches, bad);
}

// Blocks per (local expert, source) pair in unpack and combine_send: enough for about
// kTargetBlocks blocks in all (one block per pair left most SMs idle: measured 79 us for
// a 1-rank dispatch of 224 rows on an H100), never more warps than a pair has rows.
constexpr int kTargetBlocks = 256;
int row_chunks(const Params& p) {
  const int pairs = p.E * p.num_ranks;
  int chunks = (kTargetBlocks + pairs - 1) / pairs;
  const int most = (p.T + kWarps - 1) / kWarps;
  if (chunks > most) chunks = most;
  return chunks < 1 ? 1 : chunks;
}

}  // namespace

cudaError_t launch_count(const Params& p, const PeerState& peers, const int64_t* idx, int num_tokens, int32_t* slot,
                         int32_t* counts, cudaStream_t s) {
  if (p.max_ranks > 1024) return cudaErrorInvalidValue;  // the live flags' shared array
  const int experts = p.num_ranks * p.E;
  count_kernel<<<(experts + kWarps - 1) / kWarps, kThreads, 0, s>>>(p, peers, idx, num_tokens, slot, counts);
  return cudaGetLastError();
}
cudaError_t launch_dispatch(const Params& p, const PeerState& peers, void* const* regions, const uint16_t* x,
                            const int64_t* idx, const int32_t* slot, const int32_t* counts, int num_tokens,
                            cudaStream_t s) {
  if (num_tokens > 0) {
    // Blocks per token: one block per token left most of the GPU idle (measured with
    // Nsight Compute on an H100: 22.7 us for 128 tokens of hidden 7168, 2.5% of DRAM
    // bandwidth); about 512 blocks in all, never more warps than scale blocks.
    constexpr int kDispatchBlocks = 512;
    const int scale_blocks = p.H / kScaleBlock;
    int parts = (kDispatchBlocks + num_tokens - 1) / num_tokens;
    const int most = (scale_blocks + kWarps - 1) / kWarps;
    parts = parts < 1 ? 1 : (parts > most ? most : parts);
    dispatch_kernel<<<num_tokens * parts, kThreads, 0, s>>>(p, peers, regions, x, idx, slot, counts, parts);
  } else {
    signal_kernel<<<1, 128, 0, s>>>(p, peers, regions, counts, p.off_dsig);
  }
  return cudaGetLastError();
}
cudaError_t launch_unpack(const Params& p, const PeerState& peers, void* own, const DevOut& out, cudaStream_t s) {
  // A call of one rank waits for nothing: its own rows were written earlier on the stream
  // (a kernel less: the launch gap was 2-3 us of a 45 us call on an H200).
  if (p.num_ranks > 1) {
    wait_signals_kernel<<<1, 128, 0, s>>>(p, peers, own, p.off_dsig);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  const int chunks = row_chunks(p);
  unpack_kernel<<<p.E * p.num_ranks * chunks, kThreads, 0, s>>>(p, peers, own, out, chunks);
  return cudaGetLastError();
}
cudaError_t launch_combine_send(const Params& p, const PeerState& peers, void* const* regions,
                                const int32_t* layout_count, const int32_t* src_token, const int32_t* src_topk,
                                const uint16_t* expert_out, cudaStream_t s) {
  const int chunks = row_chunks(p);
  combine_send_kernel<<<p.E * p.num_ranks * chunks, kThreads, 0, s>>>(p, peers, regions, layout_count, src_token,
                                                                      src_topk, expert_out, chunks);
  return cudaGetLastError();
}
cudaError_t launch_combine_wait(const Params& p, const PeerState& peers, void* own, cudaStream_t s) {
  if (p.num_ranks > 1) wait_signals_kernel<<<1, 128, 0, s>>>(p, peers, own, p.off_csig);  // (see launch_unpack)
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
cudaError_t launch_fp8_conversion_check(unsigned long long* mismatches, uint32_t* first, cudaStream_t s) {
  fp8_conversion_check_kernel<<<4096, kThreads, 0, s>>>(mismatches, first);
  return cudaGetLastError();
}

}  // namespace hyrun::ep::cuda::detail
