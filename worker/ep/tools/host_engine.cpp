// ep-check engine: host backend over UcxTransport.
#include <cstring>
#include <optional>

#include "ucx_host_engine.hpp"
#include "hyrun/ep/ucx_transport.hpp"

namespace hyrun::ep::check {

namespace {

class HostEngine final : public UcxHostEngine {
 public:
  using UcxHostEngine::UcxHostEngine;

  const char* name() const override { return "host/ucx"; }

  void dispatch(const RankInputs& in, const Routing& routing, Format f, DispatchBuffers& out) override {
    backend_->dispatch(in.x.data(), in.topk_idx.data(), backend_->shape().max_tokens, routing, f, out.view());
    last_ = out.view();
  }

  void combine(const RankInputs& in, const std::vector<uint16_t>& expert_out, std::vector<uint16_t>& y) override {
    backend_->combine(expert_out.data(), last_, in.topk_idx.data(), in.topk_weights.data(),
                      backend_->shape().max_tokens, y.data());
  }

 private:
  DispatchOutput last_{};
};

}  // namespace

std::unique_ptr<Engine> make_host_engine(World& world, const Shape& max_shape, std::chrono::milliseconds flush_timeout) {
  return std::make_unique<HostEngine>(world, max_shape, flush_timeout);
}

}  // namespace hyrun::ep::check
