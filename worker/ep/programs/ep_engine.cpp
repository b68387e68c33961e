#include "ep_engine.hpp"

#ifdef HYRUN_EP_WITH_CUDA
#include "hyrun/ep/device_tensors.hpp"
#endif

namespace hyrun::ep::check {

#ifdef HYRUN_EP_WITH_CUDA
struct Engine::DeviceTensors : cuda::DeviceTensors {
  explicit DeviceTensors(const Shape& s) : cuda::DeviceTensors(s, Format::kBF16) {}  // room for either format
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
