#pragma once
// What the host backend's ep-check engines share: one UcxTransport region mapped for the
// largest shape, a HostBackend re-armed for each test shape, and the region accessors of
// the masked round. The host engine uses it directly; the staged CUDA engine adds device
// tensors copied through pinned memory.
#include <algorithm>
#include <cstring>
#include <optional>

#include "ep_engine.hpp"
#include "hyrun/ep/host_backend.hpp"
#include "hyrun/ep/ucx_transport.hpp"

namespace hyrun::ep::check {

class UcxHostEngine : public Engine {
 public:
  UcxHostEngine(World& world, const Shape& max_shape, std::chrono::milliseconds flush_timeout)
      : world_(world), transport_(world, region_bytes(max_shape), flush_timeout) {}

  void begin_shape(const Shape& shape, std::chrono::milliseconds timeout) override {
    backend_.reset();
    world_.barrier();  // nobody still reads or writes the old layout
    auto region = transport_.region();
    std::memset(region.data(), 0, std::min(region.size(), region_bytes(shape)));
    world_.barrier();  // nobody writes before every region is zero
    backend_.emplace(shape, transport_, timeout);
  }

  void fill_region(uint8_t value) override { fill_bytes(transport_.region(), value); }
  std::size_t region_bytes_not(uint8_t value) override { return count_bytes_not(transport_.region(), value); }

 protected:
  World& world_;
  UcxTransport transport_;
  std::optional<HostBackend> backend_;
};

}  // namespace hyrun::ep::check
