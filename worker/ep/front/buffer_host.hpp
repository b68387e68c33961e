#pragma once
// Internal: the kHost path of Buffer: HostBackend on host tensors, over the transport that
// make_transport() chooses (the one place a second transport, NIXL or shared memory, would
// be chosen; UcxTransport today). The staged CUDA path derives from it.
#include <memory>
#include <optional>

#include "buffer_path.hpp"
#include "hyrun/ep/host_backend.hpp"
#include "hyrun/ep/ucx_transport.hpp"

namespace hyrun::ep {

class HostPath : public Buffer::Path {
 public:
  HostPath(World& world, const BufferOptions& options);
  Backend backend() const override { return Backend::kHost; }
  const Shape& shape() const override { return shape_; }
  std::vector<std::byte> local_descriptor() const override { return transport_->local_descriptor(); }
  void attach_peer(int peer, std::span<const std::byte> descriptor) override;
  void detach_peer(int peer) override;
  uint64_t epoch() const override { return backend_->epoch(); }
  void set_epoch(uint64_t epoch) override { backend_->set_epoch(epoch); }
  void rearm(const Shape& shape, std::chrono::milliseconds timeout) override;
  void launch_dispatch(const uint16_t* x, const int64_t* topk_idx, int num_tokens, const Routing& routing, Format f,
                       const DispatchOutput& out) override;
  void launch_combine(const uint16_t* expert_out, const DispatchOutput& handle, const int64_t* topk_idx,
                      const float* topk_weights, int num_tokens, uint16_t* out) override;
  void synchronize() override {}  // the host calls are complete when they return
  RegionRows region_rows(Format f) override;
  void fill_region(uint8_t value) override;
  std::size_t region_bytes_not(uint8_t value) override;

 protected:
  World& world_;
  Shape max_shape_, shape_;
  std::unique_ptr<Transport> transport_;
  std::optional<HostBackend> backend_;
};

/// The transport of the host compute paths: this rank's region for `options.shape`, its
/// peers as `options.attach` says. Collective with PeerAttach::kCollective.
std::unique_ptr<Transport> make_transport(World& world, const BufferOptions& options);

}  // namespace hyrun::ep
