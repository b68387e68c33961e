// Buffer path kHost: HostBackend over the chosen transport, host tensors. Also the core of
// the staged CUDA path (buffer_cuda_staged.cpp), which derives from it.
#include "buffer_host.hpp"

#include <cstring>

namespace hyrun::ep {

HostPath::HostPath(World& world, const BufferOptions& options)
    : world_(world), max_shape_(options.shape), shape_(options.shape), transport_(make_transport(world, options)) {
  backend_.emplace(shape_, *transport_, options.timeout);
}

std::unique_ptr<Transport> make_transport(World& world, const BufferOptions& options) {
  return std::make_unique<UcxTransport>(world, region_bytes(options.shape), options.timeout, options.attach);
}

void HostPath::attach_peer(int peer, std::span<const std::byte> descriptor) {
  transport_->attach_peer(peer, descriptor);
}
void HostPath::detach_peer(int peer) { transport_->detach_peer(peer); }

void HostPath::rearm(const Shape& shape, std::chrono::milliseconds timeout) {
  check_rearm_shape(shape, max_shape_);
  backend_.reset();
  world_.barrier();  // nobody still reads or writes the old layout
  auto region = transport_->region();
  std::memset(region.data(), 0, std::min(region.size(), region_bytes(shape)));
  world_.barrier();  // nobody writes before every region is zero
  shape_ = shape;
  backend_.emplace(shape_, *transport_, timeout);
}

void HostPath::launch_dispatch(const uint16_t* x, const int64_t* topk_idx, int num_tokens, const Routing& routing,
                               Format f, const DispatchOutput& out) {
  backend_->dispatch(x, topk_idx, num_tokens, routing, f, out);
}

void HostPath::launch_combine(const uint16_t* expert_out, const DispatchOutput& handle, const int64_t* topk_idx,
                              const float* topk_weights, int num_tokens, uint16_t* out) {
  backend_->combine(expert_out, handle, topk_idx, topk_weights, num_tokens, out);
}

RegionRows HostPath::region_rows(Format f) {
  // The staged CUDA path derives from this one, but its outputs live in device memory.
  if (backend() != Backend::kHost) return Path::region_rows(f);
  return backend_->region_rows(f);
}

void HostPath::fill_region(uint8_t value) {
  auto r = transport_->region();
  std::memset(r.data(), value, r.size());
}

std::size_t HostPath::region_bytes_not(uint8_t value) {
  std::size_t n = 0;
  for (std::byte b : transport_->region()) n += std::to_integer<uint8_t>(b) != value;
  return n;
}

std::unique_ptr<Buffer::Path> make_host_path(World& world, const BufferOptions& options) {
  return std::make_unique<HostPath>(world, options);
}

}  // namespace hyrun::ep
