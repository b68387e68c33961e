#pragma once
// One rank's EP under test in ep-check: a backend plus its transport, built once for the
// largest shape and world (--max-ranks), re-armed for each test shape. Outputs always
// come back to host buffers so that the same reference checks judge every backend.
#include <algorithm>
#include <cstring>
#include <span>
#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include "hyrun/ep/host_backend.hpp"
#include "hyrun/worker.hpp"
#include "reference_inputs.hpp"

namespace hyrun::ep::check {

class Engine {
 public:
  virtual ~Engine() = default;
  /// "host/ucx", "cuda/ipc", "cuda/staged-ucx"
  virtual const char* name() const = 0;
  /// Collective (every rank of the world): barrier, zero this rank's receive region for
  /// `shape` (a new shape moves the signal words, old bytes must not look like epochs),
  /// barrier, new backend with `timeout`. `shape` must fit in the max shape.
  virtual void begin_shape(const Shape& shape, std::chrono::milliseconds timeout) = 0;
  /// Dispatch of this rank's inputs; the outputs end up in `out` (host).
  virtual void dispatch(const RankInputs& in, const Routing& routing, Format f, DispatchBuffers& out) = 0;
  /// Combine of `expert_out` [E, R*T, H] (host) for the last dispatch; result in y [T, H].
  virtual void combine(const RankInputs& in, const std::vector<uint16_t>& expert_out, std::vector<uint16_t>& y) = 0;
  /// Fills this rank's whole receive region with `value` (masked-round witness).
  virtual void fill_region(uint8_t value) = 0;
  /// Bytes of this rank's receive region that differ from `value`.
  virtual std::size_t region_bytes_not(uint8_t value) = 0;
};

/// fill_region / region_bytes_not for a receive region in host memory.
inline void fill_bytes(std::span<std::byte> region, uint8_t value) {
  std::memset(region.data(), value, region.size());
}
inline std::size_t count_bytes_not(std::span<const std::byte> region, uint8_t value) {
  return static_cast<std::size_t>(
      std::count_if(region.begin(), region.end(), [value](std::byte b) { return std::to_integer<uint8_t>(b) != value; }));
}

/// Host backend over UcxTransport: one region of region_bytes(max_shape), mapped once.
std::unique_ptr<Engine> make_host_engine(World& world, const Shape& max_shape, std::chrono::milliseconds flush_timeout);

#ifdef HYRUN_EP_WITH_CUDA
/// CUDA backend, peers' regions mapped through CUDA IPC (handles via World::allgatherv).
/// Only within one node.
std::unique_ptr<Engine> make_cuda_ipc_engine(World& world, const Shape& max_shape);
/// Inputs and outputs in device memory, staged through pinned host memory and moved by
/// the host backend over UcxTransport (--disable-ll-nvlink, or several nodes).
std::unique_ptr<Engine> make_cuda_staged_engine(World& world, const Shape& max_shape,
                                                std::chrono::milliseconds flush_timeout);
/// Selects this rank's GPU (local rank modulo the visible devices); false if none.
bool select_cuda_device(int local_rank, std::string* why);
#endif

}  // namespace hyrun::ep::check
