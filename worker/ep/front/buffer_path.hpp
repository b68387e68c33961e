#pragma once
// Internal: the backend-specific part of hyrun::ep::Buffer (buffer.hpp). One
// implementation per Backend: buffer_host.cpp, buffer_cuda_ipc.cpp, buffer_cuda_staged.cpp.
#include <memory>

#include "hyrun/ep/buffer.hpp"

namespace hyrun::ep {

class Buffer::Path {
 public:
  virtual ~Path() = default;
  virtual Backend backend() const = 0;
  virtual const Shape& shape() const = 0;
  virtual CUstream_st* stream() const { return nullptr; }
  virtual std::vector<std::byte> local_descriptor() const = 0;
  virtual void attach_peer(int peer, std::span<const std::byte> descriptor) = 0;
  virtual void detach_peer(int peer) = 0;
  virtual uint64_t epoch() const = 0;
  virtual void set_epoch(uint64_t epoch) = 0;
  virtual void rearm(const Shape& shape, std::chrono::milliseconds timeout) = 0;
  virtual void launch_dispatch(const uint16_t* x, const int64_t* topk_idx, int num_tokens, const Routing& routing,
                               Format f, const DispatchOutput& out) = 0;
  virtual void launch_combine(const uint16_t* expert_out, const DispatchOutput& handle, const int64_t* topk_idx,
                              const float* topk_weights, int num_tokens, uint16_t* out) = 0;
  virtual void synchronize() = 0;
  /// Views of the region's dispatch rows (host tensors only; default: UsageError).
  virtual RegionRows region_rows(Format f);
  /// Closes every mapping of a peer's region (default: none to close).
  virtual void close_peers() {}
  virtual void fill_region(uint8_t value) = 0;
  virtual std::size_t region_bytes_not(uint8_t value) = 0;
};

std::unique_ptr<Buffer::Path> make_host_path(World& world, const BufferOptions& options);
#ifdef HYRUN_EP_WITH_CUDA
std::unique_ptr<Buffer::Path> make_cuda_ipc_path(World& world, const BufferOptions& options);
std::unique_ptr<Buffer::Path> make_cuda_staged_path(World& world, const BufferOptions& options);
#endif

/// The shape checks rearm() makes on every path: `shape` fits in `max`.
void check_rearm_shape(const Shape& shape, const Shape& max);

}  // namespace hyrun::ep
