// EP CUDA kernels. Every per-value operation is a shared function of per_token.hpp.
#include <cuda_runtime.h>

#include "cuda_kernels.hpp"
#include "hyrun/ep/per_token.hpp"

namespace hyrun::ep::cuda::detail {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxTopkDev = 32;

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One warp per global expert: numbers the kept selections of that expert in (token, k)
// order (the host backend's order) and counts them.
__global__ void count_kernel(Params p, const int64_t* idx, int num_tokens, const uint8_t* active, int32_t* slot,
                             int32_t* counts) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = blockIdx.x * kWarps + warp;
  if (g >= p.num_ranks * p.E) return;
  const int n = num_tokens * p.K;
  int base = 0;
  for (int start = 0; start < n; start += 32) {
    const int f = start + lane;
    const bool match = f < n && mask_expert(idx[f], p.E, p.num_ranks, active) == g;
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
// in the destination rank's region.
__global__ void dispatch_kernel(Params p, void* const* regions, const uint16_t* x, const int64_t* idx,
                                const int32_t* slot, bool fp8) {
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
          make_int4(i, static_cast<int>(threadIdx.x), p.rank, kMessageMagic ^ (fp8 ? 1 : 2));
    }
    msgs[threadIdx.x] = m;
  }
  __syncthreads();
  const uint16_t* row = x + static_cast<size_t>(i) * p.H;
  if (fp8) {
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

// Per active destination: (counts,) system fence, epoch word.
__global__ void signal_kernel(Params p, void* const* regions, const uint8_t* active, const int32_t* counts,
                              unsigned long long off_sig, unsigned long long epoch) {
  __threadfence_system();
  for (int r = threadIdx.x; r < p.num_ranks; r += blockDim.x) {
    if (!active[r]) continue;
    unsigned char* base = static_cast<unsigned char*>(regions[r]);
    if (counts != nullptr) {
      volatile int32_t* c = reinterpret_cast<volatile int32_t*>(base + p.off_counts) + p.rank * p.E;
      for (int e = 0; e < p.E; ++e) c[e] = counts[r * p.E + e];
      __threadfence_system();
    }
    *reinterpret_cast<volatile unsigned long long*>(base + off_sig + 8ull * p.rank) = epoch;
  }
  __threadfence_system();
}

// Spins on this rank's signal words until every active source reached the epoch or the
// timeout passed; missing[r] = 1 for the silent ones.
__global__ void wait_kernel(Params p, void* own, const uint8_t* active, unsigned long long off_sig,
                            unsigned long long epoch, unsigned long long timeout_ns, int32_t* missing) {
  const unsigned long long start = global_ns();
  for (int r = threadIdx.x; r < p.max_ranks; r += blockDim.x) {
    int miss = 0;
    if (r < p.num_ranks && active[r]) {
      volatile unsigned long long* w =
          reinterpret_cast<volatile unsigned long long*>(static_cast<unsigned char*>(own) + off_sig + 8ull * r);
      while (*w < epoch) {
        if (global_ns() - start > timeout_ns) {
          miss = 1;
          break;
        }
        __nanosleep(64);
      }
    }
    missing[r] = miss;
  }
  __threadfence();
}

// One block per (local expert, source rank): copies the messages into the outputs.
__global__ void unpack_kernel(Params p, const void* own, const uint8_t* active, const int32_t* missing, bool fp8,
                              DevOut out) {
  const int e = blockIdx.x / p.max_ranks, src = blockIdx.x % p.max_ranks;
  const unsigned char* region = static_cast<const unsigned char*>(own);
  int n = 0;
  if (src < p.num_ranks && active[src] && !missing[src]) {
    n = reinterpret_cast<const volatile int32_t*>(region + p.off_counts)[src * p.E + e];
    n = n < 0 ? 0 : (n > p.T ? p.T : n);
  }
  if (threadIdx.x == 0) {
    out.layout_count[e * p.max_ranks + src] = n;
    if (n > 0) atomicAdd(&out.recv_count[e], n);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int j = warp; j < n; j += kWarps) {
    const unsigned long long row = (static_cast<unsigned long long>(e) * p.max_ranks + src) * p.T + j;
    const unsigned char* m = region + p.off_dispatch + row * p.slot_bytes;
    if (lane == 0) {
      const MessageHeader* h = reinterpret_cast<const MessageHeader*>(m);
      out.src_token[row] = h->src_token;
      out.src_topk[row] = h->src_topk;
    }
    const uint4* payload = reinterpret_cast<const uint4*>(m + kMessageHeaderBytes);
    if (fp8) {
      uint4* dst = reinterpret_cast<uint4*>(static_cast<unsigned char*>(out.recv_x) + row * p.H);
      for (int v = lane; v < p.H / 16; v += 32) dst[v] = payload[v];
      const float* sc = reinterpret_cast<const float*>(m + kMessageHeaderBytes + p.H);
      for (int b = lane; b < p.H / kScaleBlock; b += 32) out.recv_scales[row * (p.H / kScaleBlock) + b] = sc[b];
    } else {
      uint4* dst = reinterpret_cast<uint4*>(static_cast<unsigned char*>(out.recv_x) + row * p.H * 2);
      for (int v = lane; v < p.H / 8; v += 32) dst[v] = payload[v];
    }
  }
}

// One block per (local expert, source rank): expert output rows back to their source.
__global__ void combine_send_kernel(Params p, void* const* regions, const uint8_t* active, const int32_t* layout_count,
                                    const int32_t* src_token, const int32_t* src_topk, const uint16_t* expert_out) {
  const int e = blockIdx.x / p.max_ranks, src = blockIdx.x % p.max_ranks;
  if (src >= p.num_ranks || !active[src]) return;
  const int n = layout_count[e * p.max_ranks + src];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int j = warp; j < n; j += kWarps) {
    const unsigned long long row = (static_cast<unsigned long long>(e) * p.max_ranks + src) * p.T + j;
    const unsigned long long dst_row = static_cast<unsigned long long>(src_token[row]) * p.K + src_topk[row];
    uint4* dst = reinterpret_cast<uint4*>(static_cast<unsigned char*>(regions[src]) + p.off_combine + dst_row * p.H * 2);
    const uint4* s = reinterpret_cast<const uint4*>(expert_out + row * p.H);
    for (int v = lane; v < p.H / 8; v += 32) dst[v] = s[v];
  }
}

// One block per token: out = sum over kept k of w_k * row_k (combine_channel).
__global__ void combine_reduce_kernel(Params p, const void* own, const int64_t* idx, const float* weights,
                                      const uint8_t* active, uint16_t* out) {
  __shared__ const uint16_t* rows[kMaxTopkDev];
  __shared__ float w[kMaxTopkDev];
  const int i = blockIdx.x;
  const uint16_t* data = reinterpret_cast<const uint16_t*>(static_cast<const unsigned char*>(own) + p.off_combine);
  if (threadIdx.x < p.K) {
    const int f = i * p.K + threadIdx.x;
    rows[threadIdx.x] = mask_expert(idx[f], p.E, p.num_ranks, active) >= 0 ? data + static_cast<size_t>(f) * p.H : nullptr;
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

cudaError_t launch_count(const Params& p, const int64_t* idx, int num_tokens, const uint8_t* active, int32_t* slot,
                         int32_t* counts, cudaStream_t s) {
  const int experts = p.num_ranks * p.E;
  count_kernel<<<(experts + kWarps - 1) / kWarps, kThreads, 0, s>>>(p, idx, num_tokens, active, slot, counts);
  return cudaGetLastError();
}
cudaError_t launch_dispatch(const Params& p, void* const* regions, const uint16_t* x, const int64_t* idx,
                            const int32_t* slot, int num_tokens, bool fp8, cudaStream_t s) {
  if (num_tokens > 0) dispatch_kernel<<<num_tokens, kThreads, 0, s>>>(p, regions, x, idx, slot, fp8);
  return cudaGetLastError();
}
cudaError_t launch_signal(const Params& p, void* const* regions, const uint8_t* active, const int32_t* counts,
                          unsigned long long off_sig, unsigned long long epoch, cudaStream_t s) {
  signal_kernel<<<1, 128, 0, s>>>(p, regions, active, counts, off_sig, epoch);
  return cudaGetLastError();
}
cudaError_t launch_wait(const Params& p, void* own, const uint8_t* active, unsigned long long off_sig,
                        unsigned long long epoch, unsigned long long timeout_ns, int32_t* missing, cudaStream_t s) {
  wait_kernel<<<1, 128, 0, s>>>(p, own, active, off_sig, epoch, timeout_ns, missing);
  return cudaGetLastError();
}
cudaError_t launch_unpack(const Params& p, const void* own, const uint8_t* active, const int32_t* missing, bool fp8,
                          const DevOut& out, cudaStream_t s) {
  cudaError_t err = cudaMemsetAsync(out.recv_count, 0, sizeof(int32_t) * p.E, s);
  if (err != cudaSuccess) return err;
  unpack_kernel<<<p.E * p.max_ranks, kThreads, 0, s>>>(p, own, active, missing, fp8, out);
  return cudaGetLastError();
}
cudaError_t launch_combine_send(const Params& p, void* const* regions, const uint8_t* active,
                                const int32_t* layout_count, const int32_t* src_token, const int32_t* src_topk,
                                const uint16_t* expert_out, cudaStream_t s) {
  combine_send_kernel<<<p.E * p.max_ranks, kThreads, 0, s>>>(p, regions, active, layout_count, src_token, src_topk,
                                                            expert_out);
  return cudaGetLastError();
}
cudaError_t launch_combine_reduce(const Params& p, const void* own, const int64_t* idx, const float* weights,
                                  const uint8_t* active, int num_tokens, uint16_t* out, cudaStream_t s) {
  if (num_tokens > 0) combine_reduce_kernel<<<num_tokens, kThreads, 0, s>>>(p, own, idx, weights, active, out);
  return cudaGetLastError();
}
cudaError_t launch_cast_fp8(const uint16_t* x, int rows, int H, uint8_t* q, float* scales, cudaStream_t s) {
  if (rows > 0) cast_fp8_kernel<<<rows, kThreads, 0, s>>>(x, H, q, scales);
  return cudaGetLastError();
}

}  // namespace hyrun::ep::cuda::detail
