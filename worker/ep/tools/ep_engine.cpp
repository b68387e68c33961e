#include "ep_engine.hpp"

#ifdef HYRUN_EP_WITH_CUDA
#include "hyrun/ep/cuda_memory.hpp"
#endif

namespace hyrun::ep::check {

#ifdef HYRUN_EP_WITH_CUDA
/// One rank's inputs and outputs for the largest shape, in device memory.
struct Engine::DeviceTensors {
  template <class T>
  using Array = cuda::DeviceArray<T>;
  explicit DeviceTensors(const Shape& s)
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
  DispatchOutput view() const {
    return DispatchOutput{recv_x.get(), recv_scales.get(), src_token.get(), src_topk.get(), layout_count.get(),
                          recv_count.get()};
  }
};
#else
struct Engine::DeviceTensors {};
#endif

Engine::Engine(World& world, const Shape& max_shape, Backend backend, std::chrono::milliseconds timeout)
    : buffer_(world, BufferOptions{max_shape, backend, timeout, PeerAttach::kCollective}) {
#ifdef HYRUN_EP_WITH_CUDA
  if (on_device(backend)) dev_ = std::make_unique<DeviceTensors>(max_shape);
#endif
}

Engine::~Engine() = default;

void Engine::begin_shape(const Shape& shape, std::chrono::milliseconds timeout) { buffer_.rearm(shape, timeout); }

void Engine::dispatch(const RankInputs& in, const Routing& routing, Format f, DispatchBuffers& out) {
  const int T = buffer_.shape().max_tokens;
  if (!dev_) {
    buffer_.dispatch(in.x.data(), in.topk_idx.data(), T, routing, f, out.view());
    last_ = out.view();
    return;
  }
#ifdef HYRUN_EP_WITH_CUDA
  // Everything on the Buffer's stream: uploads, poison, the call, downloads.
  const auto s = buffer_.stream();
  dev_->x.upload(in.x.data(), in.x.size(), s);
  dev_->topk_idx.upload(in.topk_idx.data(), in.topk_idx.size(), s);
  dev_->weights.upload(in.topk_weights.data(), in.topk_weights.size(), s);
  for (auto* a : {&dev_->src_token, &dev_->src_topk, &dev_->layout_count, &dev_->recv_count}) a->fill_bytes(0xFF, s);
  dev_->recv_x.fill_bytes(0xFF, s);
  dev_->recv_scales.fill_bytes(0xFF, s);
  buffer_.dispatch(dev_->x.get(), dev_->topk_idx.get(), T, routing, f, dev_->view());
  dev_->recv_x.download(out.recv_x.data(), out.recv_x.size(), s);
  if (!out.recv_scales.empty()) dev_->recv_scales.download(out.recv_scales.data(), out.recv_scales.size(), s);
  dev_->src_token.download(out.recv_src_token.data(), out.recv_src_token.size(), s);
  dev_->src_topk.download(out.recv_src_topk.data(), out.recv_src_topk.size(), s);
  dev_->layout_count.download(out.layout_count.data(), out.layout_count.size(), s);
  dev_->recv_count.download(out.recv_count.data(), out.recv_count.size(), s);
#endif
}

void Engine::combine(const RankInputs& in, const std::vector<uint16_t>& expert_out, std::vector<uint16_t>& y) {
  const int T = buffer_.shape().max_tokens;
  if (!dev_) {
    buffer_.combine(expert_out.data(), last_, in.topk_idx.data(), in.topk_weights.data(), T, y.data());
    return;
  }
#ifdef HYRUN_EP_WITH_CUDA
  const auto s = buffer_.stream();
  dev_->expert_out.upload(expert_out.data(), expert_out.size(), s);
  dev_->y.fill_bytes(0xFF, s);
  buffer_.combine(dev_->expert_out.get(), dev_->view(), dev_->topk_idx.get(), dev_->weights.get(), T, dev_->y.get());
  dev_->y.download(y.data(), y.size(), s);
#endif
}

}  // namespace hyrun::ep::check
