#include "hyrun/ep/buffer.hpp"

#include <fmt/format.h>

#include "buffer_path.hpp"

namespace hyrun::ep {

const char* to_string(Backend b) {
  switch (b) {
    case Backend::kHost: return "host/ucx";
    case Backend::kCudaIpc: return "cuda/ipc";
    case Backend::kCudaStaged: return "cuda/staged-ucx";
  }
  return "?";
}

bool built_with_cuda() {
#ifdef HYRUN_EP_WITH_CUDA
  return true;
#else
  return false;
#endif
}

#ifndef HYRUN_EP_WITH_CUDA
bool select_cuda_device(int local_rank, std::string* why) {
  (void)local_rank;
  if (why) *why = "this build has no CUDA backend (built without nvcc)";
  return false;
}
#endif

Backend choose_backend(const std::string& name, bool disable_ll_nvlink, int local_rank, int num_nodes) {
  if (name != "host" && name != "cuda" && name != "auto")
    throw UsageError(fmt::format("--backend '{}': expected host, cuda or auto", name));
  if (name == "host") return Backend::kHost;
  std::string why;
  if (!select_cuda_device(local_rank, &why)) {
    if (name == "auto") return Backend::kHost;
    throw UsageError(fmt::format("--backend cuda: {}; use --backend host (or auto)", why));
  }
  return disable_ll_nvlink || num_nodes > 1 ? Backend::kCudaStaged : Backend::kCudaIpc;
}

Backend choose_backend(const std::string& name, bool disable_ll_nvlink, const World& world) {
  return choose_backend(name, disable_ll_nvlink, world.local_rank(), world.num_nodes());
}

void check_rearm_shape(const Shape& shape, const Shape& max) {
  shape.validate();
  if (shape.max_ranks > max.max_ranks || region_bytes(shape) > region_bytes(max) || shape.max_tokens > max.max_tokens ||
      shape.hidden > max.hidden || shape.topk > max.topk || shape.experts_per_rank > max.experts_per_rank)
    throw UsageError(
        fmt::format("EP buffer: shape {} does not fit in the buffer's shape {}", shape.describe(), max.describe()));
}

Buffer::Buffer(World& world, const BufferOptions& options) {
  options.shape.validate();
  switch (options.backend) {
    case Backend::kHost: path_ = make_host_path(world, options); break;
#ifdef HYRUN_EP_WITH_CUDA
    case Backend::kCudaIpc: path_ = make_cuda_ipc_path(world, options); break;
    case Backend::kCudaStaged: path_ = make_cuda_staged_path(world, options); break;
#else
    default: throw UsageError("EP buffer: a CUDA backend was asked for, but this build has no CUDA backend");
#endif
  }
}

Buffer::~Buffer() = default;

RegionRows Buffer::Path::region_rows(Format f) {
  (void)f;
  throw UsageError(
      fmt::format("EP buffer: region_rows is for the host backend; backend {} keeps its outputs in "
                  "device memory",
                  to_string(backend())));
}

Backend Buffer::backend() const { return path_->backend(); }
const Shape& Buffer::shape() const { return path_->shape(); }
CUstream_st* Buffer::stream() const { return path_->stream(); }
std::vector<std::byte> Buffer::local_descriptor() const { return path_->local_descriptor(); }
void Buffer::attach_peer(int peer, std::span<const std::byte> descriptor) {
  check_open("attach_peer");
  path_->attach_peer(peer, descriptor);
}
void Buffer::detach_peer(int peer) { path_->detach_peer(peer); }
uint64_t Buffer::epoch() const { return path_->epoch(); }
void Buffer::set_epoch(uint64_t epoch) { path_->set_epoch(epoch); }
void Buffer::rearm(const Shape& shape, std::chrono::milliseconds timeout) { path_->rearm(shape, timeout); }
void Buffer::check_open(const char* what) const {
  if (closed_) throw UsageError(fmt::format("EP buffer: {} after close_peers()", what));
}
void Buffer::close_peers() {
  path_->close_peers();
  closed_ = true;
}
void Buffer::launch_dispatch(const uint16_t* x, const int64_t* topk_idx, int num_tokens, const Routing& routing,
                             Format f, const DispatchOutput& out) {
  check_open("dispatch");
  path_->launch_dispatch(x, topk_idx, num_tokens, routing, f, out);
}
void Buffer::launch_combine(const uint16_t* expert_out, const DispatchOutput& handle, const int64_t* topk_idx,
                            const float* topk_weights, int num_tokens, uint16_t* out) {
  check_open("combine");
  path_->launch_combine(expert_out, handle, topk_idx, topk_weights, num_tokens, out);
}
RegionRows Buffer::region_rows(Format f) {
  check_open("region_rows");
  return path_->region_rows(f);
}
void Buffer::synchronize() { path_->synchronize(); }
void Buffer::fill_region(uint8_t value) { path_->fill_region(value); }
std::size_t Buffer::region_bytes_not(uint8_t value) { return path_->region_bytes_not(value); }

}  // namespace hyrun::ep
