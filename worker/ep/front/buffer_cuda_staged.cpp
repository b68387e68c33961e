// Buffer path kCudaStaged: device tensors copied through pinned host memory on one
// stream and moved by the host backend over UcxTransport (--disable-ll-nvlink; the path
// across nodes). Outputs: only the rows dispatch wrote go back to the device, so rows
// not covered by a layout count stay untouched, as with the other backends.
#include <cuda_runtime_api.h>

#include <optional>

#include "buffer_host.hpp"
#include "hyrun/ep/cuda_memory.hpp"
#include "hyrun/ep/device_tensors.hpp"

namespace hyrun::ep {
namespace {

class CudaStagedPath final : public HostPath {
 public:
  CudaStagedPath(World& world, const BufferOptions& o)
      : HostPath(world, o), pinned_(o.shape, Format::kBF16) {}  // room for either format

  Backend backend() const override { return Backend::kCudaStaged; }
  CUstream_st* stream() const override { return stream_.ep(); }

  void launch_dispatch(const uint16_t* x, const int64_t* topk_idx, int num_tokens, const Routing& routing, Format f,
                       const DispatchOutput& out) override {
    const Shape& s = shape_;
    d2h(pinned_.x.get(), x, sizeof(uint16_t) * num_tokens * s.hidden);
    d2h(pinned_.topk_idx.get(), topk_idx, sizeof(int64_t) * num_tokens * s.topk);
    stream_.sync();
    const DispatchOutput pin = pinned_.view();
    backend_->dispatch(pinned_.x.get(), pinned_.topk_idx.get(), num_tokens, routing, f, pin);
    // Sizes of the current shape (after a rearm the caller's outputs may be smaller).
    h2d(out.layout_count, pinned_.layout_count.get(), sizeof(int32_t) * s.experts_per_rank * s.max_ranks);
    h2d(out.recv_count, pinned_.recv_count.get(), sizeof(int32_t) * s.experts_per_rank);
    const std::size_t row_bytes = static_cast<std::size_t>(s.hidden) * (f == Format::kFP8 ? 1 : 2);
    const std::size_t nb = static_cast<std::size_t>(s.hidden / kScaleBlock);
    for_each_run(s, [&](std::size_t row, std::size_t n) {
      h2d(static_cast<uint8_t*>(out.recv_x) + row * row_bytes, pinned_.recv_x.get() + row * row_bytes, n * row_bytes);
      if (f == Format::kFP8)
        h2d(out.recv_scales + row * nb, pinned_.recv_scales.get() + row * nb, n * nb * sizeof(float));
      h2d(out.recv_src_token + row, pinned_.src_token.get() + row, n * sizeof(int32_t));
      h2d(out.recv_src_topk + row, pinned_.src_topk.get() + row, n * sizeof(int32_t));
    });
    stream_.sync();
  }

  void launch_combine(const uint16_t* expert_out, const DispatchOutput& handle, const int64_t* topk_idx,
                      const float* topk_weights, int num_tokens, uint16_t* out) override {
    (void)handle;    // the pinned copy of the last dispatch's outputs is the host backend's handle
    (void)topk_idx;  // the pinned copy of the dispatch's topk_idx
    const Shape& s = shape_;
    const std::size_t H = static_cast<std::size_t>(s.hidden);
    for_each_run(s, [&](std::size_t row, std::size_t n) {
      d2h(pinned_.expert_out.get() + row * H, expert_out + row * H, n * H * sizeof(uint16_t));
    });
    d2h(pinned_.weights.get(), topk_weights, sizeof(float) * num_tokens * s.topk);
    stream_.sync();
    const DispatchOutput pin = pinned_.view();
    backend_->combine(pinned_.expert_out.get(), pin, pinned_.topk_idx.get(), pinned_.weights.get(), num_tokens,
                      pinned_.y.get());
    h2d(out, pinned_.y.get(), sizeof(uint16_t) * num_tokens * H);
    stream_.sync();
  }

 private:
  void d2h(void* dst, const void* src, std::size_t bytes) {
    cuda::cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_.get()), "stage device to host");
  }
  void h2d(void* dst, const void* src, std::size_t bytes) {
    cuda::cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_.get()), "stage host to device");
  }
  /// fn(first row, rows) for every (local expert, source) with rows from the last dispatch.
  template <class Fn>
  void for_each_run(const Shape& s, Fn fn) const {
    for (int e = 0; e < s.experts_per_rank; ++e)
      for (int src = 0; src < s.max_ranks; ++src) {
        const int n = pinned_.layout_count.get()[static_cast<std::size_t>(e) * s.max_ranks + src];
        if (n > 0) fn((static_cast<std::size_t>(e) * s.max_ranks + src) * s.max_tokens, static_cast<std::size_t>(n));
      }
  }

  cuda::CudaStream stream_;
  cuda::PinnedTensors pinned_;
};

}  // namespace

std::unique_ptr<Buffer::Path> make_cuda_staged_path(World& world, const BufferOptions& options) {
  return std::make_unique<CudaStagedPath>(world, options);
}

}  // namespace hyrun::ep
