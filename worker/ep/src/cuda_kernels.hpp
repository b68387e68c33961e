#pragma once
// Internal: launch functions of the EP CUDA kernels (cuda_kernels.cu, C++17 under nvcc),
// called by CudaBackend (cuda_backend.cpp, C++20 under the host compiler).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace hyrun::ep::cuda::detail {

struct Params {
  int rank = 0;       // this rank
  int num_ranks = 1;  // routing ranks of the call
  int max_ranks = 1;  // R
  int T = 1, H = 128, K = 1, E = 1;
  unsigned long long slot_bytes = 0, off_dispatch = 0, off_counts = 0, off_combine = 0, off_dsig = 0, off_csig = 0;
};

struct DevOut {
  void* recv_x;
  float* recv_scales;
  int32_t* src_token;
  int32_t* src_topk;
  int32_t* layout_count;
  int32_t* recv_count;
};

cudaError_t launch_count(const Params& p, const int64_t* idx, int num_tokens, const uint8_t* active, int32_t* slot,
                         int32_t* counts, cudaStream_t s);
cudaError_t launch_dispatch(const Params& p, void* const* regions, const uint16_t* x, const int64_t* idx,
                            const int32_t* slot, int num_tokens, bool fp8, cudaStream_t s);
cudaError_t launch_signal(const Params& p, void* const* regions, const uint8_t* active, const int32_t* counts,
                          unsigned long long off_sig, unsigned long long epoch, cudaStream_t s);
cudaError_t launch_wait(const Params& p, void* own, const uint8_t* active, unsigned long long off_sig,
                        unsigned long long epoch, unsigned long long timeout_ns, int32_t* missing, cudaStream_t s);
cudaError_t launch_unpack(const Params& p, const void* own, const uint8_t* active, const int32_t* missing, bool fp8,
                          const DevOut& out, cudaStream_t s);
cudaError_t launch_combine_send(const Params& p, void* const* regions, const uint8_t* active,
                                const int32_t* layout_count, const int32_t* src_token, const int32_t* src_topk,
                                const uint16_t* expert_out, cudaStream_t s);
cudaError_t launch_combine_reduce(const Params& p, const void* own, const int64_t* idx, const float* weights,
                                  const uint8_t* active, int num_tokens, uint16_t* out, cudaStream_t s);
cudaError_t launch_cast_fp8(const uint16_t* x, int rows, int H, uint8_t* q, float* scales, cudaStream_t s);

}  // namespace hyrun::ep::cuda::detail
