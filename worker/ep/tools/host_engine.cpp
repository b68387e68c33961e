// ep-check engine: host backend over UcxTransport.
#include <cstring>
#include <optional>

#include "ep_engine.hpp"
#include "hyrun/ep/ucx_transport.hpp"

namespace hyrun::ep::check {

namespace {

class HostEngine final : public Engine {
 public:
  HostEngine(World& world, const Shape& max_shape, std::chrono::milliseconds flush_timeout)
      : world_(world), transport_(world, region_bytes(max_shape), flush_timeout) {}

  const char* name() const override { return "host/ucx"; }

  void begin_shape(const Shape& shape, std::chrono::milliseconds timeout) override {
    backend_.reset();
    world_.barrier();  // nobody still reads or writes the old layout
    auto region = transport_.region();
    std::memset(region.data(), 0, std::min(region.size(), region_bytes(shape)));
    world_.barrier();  // nobody writes before every region is zero
    backend_.emplace(shape, transport_, timeout);
  }

  void dispatch(const RankInputs& in, const Routing& routing, Format f, DispatchBuffers& out) override {
    backend_->dispatch(in.x.data(), in.topk_idx.data(), backend_->shape().max_tokens, routing, f, out.view());
    last_ = out.view();
  }

  void combine(const RankInputs& in, const std::vector<uint16_t>& expert_out, std::vector<uint16_t>& y) override {
    backend_->combine(expert_out.data(), last_, in.topk_idx.data(), in.topk_weights.data(),
                      backend_->shape().max_tokens, y.data());
  }

  void fill_region(uint8_t value) override { fill_bytes(transport_.region(), value); }

  std::size_t region_bytes_not(uint8_t value) override { return count_bytes_not(transport_.region(), value); }

 private:
  World& world_;
  UcxTransport transport_;
  std::optional<HostBackend> backend_;
  DispatchOutput last_{};
};

}  // namespace

std::unique_ptr<Engine> make_host_engine(World& world, const Shape& max_shape, std::chrono::milliseconds flush_timeout) {
  return std::make_unique<HostEngine>(world, max_shape, flush_timeout);
}

}  // namespace hyrun::ep::check
