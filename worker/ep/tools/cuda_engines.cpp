// ep-check engines of the CUDA backend: CUDA IPC between the ranks of one node, and the
// staged path (--disable-ll-nvlink / several nodes): device tensors copied through pinned
// host memory and moved by the host backend over UcxTransport.
#include <algorithm>
#include <memory>
#include <optional>

#include "cuda_memory.hpp"
#include "ep_engine.hpp"
#include "ucx_host_engine.hpp"
#include "hyrun/ep/cuda_backend.hpp"
#include "hyrun/ep/ucx_transport.hpp"

namespace hyrun::ep::check {

namespace {

/// One rank's inputs and outputs for one shape, in device (DeviceArray) or pinned host
/// (PinnedArray) memory.
template <template <class> class Array>
struct RankTensors {
  explicit RankTensors(const Shape& s)
      : x(static_cast<std::size_t>(s.max_tokens) * s.hidden),
        topk_idx(static_cast<std::size_t>(s.max_tokens) * s.topk),
        weights(topk_idx.size()),
        recv_x(recv_x_bytes(s, Format::kBF16)),  // room for either format
        recv_scales(recv_scales_count(s)),
        src_token(recv_rows(s)),
        src_topk(recv_rows(s)),
        layout_count(static_cast<std::size_t>(s.experts_per_rank) * s.max_ranks),
        recv_count(static_cast<std::size_t>(s.experts_per_rank)),
        expert_out(recv_rows(s) * s.hidden),
        y(x.size()) {}
  Array<uint16_t> x;
  Array<int64_t> topk_idx;
  Array<float> weights;
  Array<uint8_t> recv_x;
  Array<float> recv_scales;
  Array<int32_t> src_token, src_topk, layout_count, recv_count;
  Array<uint16_t> expert_out, y;

  DispatchOutput view() {
    return DispatchOutput{recv_x.get(), recv_scales.get(), src_token.get(), src_topk.get(), layout_count.get(),
                          recv_count.get()};
  }
  void upload(const RankInputs& in) {
    x.upload(in.x.data(), in.x.size());
    topk_idx.upload(in.topk_idx.data(), in.topk_idx.size());
    weights.upload(in.topk_weights.data(), in.topk_weights.size());
  }
  void poison_outputs() {
    for (auto* a : {&src_token, &src_topk, &layout_count, &recv_count}) a->fill_bytes(0xFF);
    recv_x.fill_bytes(0xFF);
    recv_scales.fill_bytes(0xFF);
  }
  void download(DispatchBuffers& out) const {
    recv_x.download(out.recv_x.data(), out.recv_x.size());
    if (!out.recv_scales.empty()) recv_scales.download(out.recv_scales.data(), out.recv_scales.size());
    src_token.download(out.recv_src_token.data(), out.recv_src_token.size());
    src_topk.download(out.recv_src_topk.data(), out.recv_src_topk.size());
    layout_count.download(out.layout_count.data(), out.layout_count.size());
    recv_count.download(out.recv_count.data(), out.recv_count.size());
  }
};
using DeviceTensors = RankTensors<DeviceArray>;

class CudaIpcEngine final : public Engine {
 public:
  CudaIpcEngine(World& world, const Shape& max_shape) : world_(world), region_(max_shape) {
    if (world.num_nodes() > 1) throw UsageError("CUDA IPC needs every rank on one node; use --disable-ll-nvlink");
    const auto handle = cuda::ipc_handle(region_.get());
    const auto handles = world.allgatherv(handle);
    for (int r = 0; r < world.size(); ++r) {
      if (r == world.rank()) {
        peers_.push_back(region_.get());
      } else {
        mappings_.push_back(std::make_unique<IpcMapping>(handles[static_cast<std::size_t>(r)]));
        peers_.push_back(mappings_.back()->get());
      }
    }
  }
  ~CudaIpcEngine() override { cudaDeviceSynchronize(); }

  const char* name() const override { return "cuda/ipc"; }

  void begin_shape(const Shape& shape, std::chrono::milliseconds timeout) override {
    backend_.reset();
    stream_.sync();
    world_.barrier();
    cuda_check(cudaMemset(region_.get(), 0, std::min(region_.bytes(), region_bytes(shape))), "cudaMemset region");
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    world_.barrier();
    backend_ = std::make_unique<cuda::CudaBackend>(shape, world_.rank(), peers_, timeout);
    dev_.emplace(shape);
  }

  void dispatch(const RankInputs& in, const Routing& routing, Format f, DispatchBuffers& out) override {
    dev_->upload(in);
    dev_->poison_outputs();
    backend_->dispatch_send(dev_->x.get(), dev_->topk_idx.get(), backend_->shape().max_tokens, routing, f, stream_.ep());
    backend_->dispatch_recv(dev_->view(), stream_.ep());
    backend_->throw_if_missing(stream_.ep());
    dev_->download(out);
  }

  void combine(const RankInputs& in, const std::vector<uint16_t>& expert_out, std::vector<uint16_t>& y) override {
    (void)in;  // the device copies of topk_idx/weights from dispatch are used
    dev_->expert_out.upload(expert_out.data(), expert_out.size());
    dev_->y.fill_bytes(0xFF);
    backend_->combine_send(dev_->expert_out.get(), dev_->view(), stream_.ep());
    backend_->combine_recv(dev_->topk_idx.get(), dev_->weights.get(), backend_->shape().max_tokens, dev_->y.get(),
                           stream_.ep());
    backend_->throw_if_missing(stream_.ep());
    dev_->y.download(y.data(), y.size());
  }

  void fill_region(uint8_t value) override {
    cuda_check(cudaMemset(region_.get(), value, region_.bytes()), "cudaMemset region");
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }

  std::size_t region_bytes_not(uint8_t value) override {
    std::vector<uint8_t> host(region_.bytes());
    cuda_check(cudaMemcpy(host.data(), region_.get(), host.size(), cudaMemcpyDeviceToHost), "cudaMemcpy region");
    return static_cast<std::size_t>(std::count_if(host.begin(), host.end(), [&](uint8_t b) { return b != value; }));
  }

 private:
  World& world_;
  DeviceRegion region_;
  std::vector<std::unique_ptr<IpcMapping>> mappings_;
  std::vector<void*> peers_;
  CudaStream stream_;
  std::unique_ptr<cuda::CudaBackend> backend_;
  std::optional<DeviceTensors> dev_;
};

/// Pinned host copies of the tensors the host backend works on.
using PinnedTensors = RankTensors<PinnedArray>;

template <class T>
void d2h(PinnedArray<T>& dst, const DeviceArray<T>& src) {
  cuda_check(cudaMemcpy(dst.get(), src.get(), src.size() * sizeof(T), cudaMemcpyDeviceToHost), "stage device to host");
}
template <class T>
void h2d(DeviceArray<T>& dst, const PinnedArray<T>& src) {
  cuda_check(cudaMemcpy(dst.get(), src.get(), dst.size() * sizeof(T), cudaMemcpyHostToDevice), "stage host to device");
}

class CudaStagedEngine final : public UcxHostEngine {
 public:
  using UcxHostEngine::UcxHostEngine;

  const char* name() const override { return "cuda/staged-ucx"; }

  void begin_shape(const Shape& shape, std::chrono::milliseconds timeout) override {
    UcxHostEngine::begin_shape(shape, timeout);
    dev_.emplace(shape);
    pin_.emplace(shape);
  }

  void dispatch(const RankInputs& in, const Routing& routing, Format f, DispatchBuffers& out) override {
    dev_->upload(in);  // the caller's tensors live on the GPU
    dev_->poison_outputs();
    d2h(pin_->x, dev_->x);
    d2h(pin_->topk_idx, dev_->topk_idx);
    d2h(pin_->weights, dev_->weights);
    backend_->dispatch(pin_->x.get(), pin_->topk_idx.get(), backend_->shape().max_tokens, routing, f, pin_->view());
    // Only what dispatch wrote goes back: the outputs' untouched rows keep the device poison.
    h2d(dev_->layout_count, pin_->layout_count);
    h2d(dev_->recv_count, pin_->recv_count);
    const Shape& s = backend_->shape();
    const std::size_t row_bytes = static_cast<std::size_t>(s.hidden) * (f == Format::kFP8 ? 1 : 2);
    const int nb = s.hidden / kScaleBlock;
    for (int e = 0; e < s.experts_per_rank; ++e)
      for (int src = 0; src < s.max_ranks; ++src) {
        const int n = pin_->layout_count.get()[static_cast<std::size_t>(e) * s.max_ranks + src];
        if (n <= 0) continue;
        const std::size_t row = (static_cast<std::size_t>(e) * s.max_ranks + src) * s.max_tokens;
        auto copy = [&](void* d, const void* h, std::size_t bytes) {
          cuda_check(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), "stage host to device");
        };
        copy(dev_->recv_x.get() + row * row_bytes, pin_->recv_x.get() + row * row_bytes, n * row_bytes);
        if (f == Format::kFP8)
          copy(dev_->recv_scales.get() + row * nb, pin_->recv_scales.get() + row * nb, n * nb * sizeof(float));
        copy(dev_->src_token.get() + row, pin_->src_token.get() + row, n * sizeof(int32_t));
        copy(dev_->src_topk.get() + row, pin_->src_topk.get() + row, n * sizeof(int32_t));
      }
    dev_->download(out);
  }

  void combine(const RankInputs& in, const std::vector<uint16_t>& expert_out, std::vector<uint16_t>& y) override {
    (void)in;
    dev_->expert_out.upload(expert_out.data(), expert_out.size());
    dev_->y.fill_bytes(0xFF);
    d2h(pin_->expert_out, dev_->expert_out);
    backend_->combine(pin_->expert_out.get(), pin_->view(), pin_->topk_idx.get(), pin_->weights.get(),
                      backend_->shape().max_tokens, pin_->y.get());
    h2d(dev_->y, pin_->y);
    dev_->y.download(y.data(), y.size());
  }

 private:
  std::optional<DeviceTensors> dev_;
  std::optional<PinnedTensors> pin_;
};

}  // namespace

bool select_cuda_device(int local_rank, std::string* why) {
  if (!cuda::device_available(why)) return false;
  int n = 0;
  cuda_check(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
  cuda_check(cudaSetDevice(local_rank % n), "cudaSetDevice");
  return true;
}

std::unique_ptr<Engine> make_cuda_ipc_engine(World& world, const Shape& max_shape) {
  return std::make_unique<CudaIpcEngine>(world, max_shape);
}

std::unique_ptr<Engine> make_cuda_staged_engine(World& world, const Shape& max_shape,
                                                std::chrono::milliseconds flush_timeout) {
  return std::make_unique<CudaStagedEngine>(world, max_shape, flush_timeout);
}

}  // namespace hyrun::ep::check
