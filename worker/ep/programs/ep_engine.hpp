#pragma once
// One rank's EP under test in ep-check: the library's Buffer (any backend), built once
// for the largest shape and world (--max-ranks), re-armed for each test shape. The test
// harness's part: inputs come from host vectors and outputs go back to host buffers
// (through device copies on the Buffer's stream for the CUDA backends, with device
// outputs poisoned first), so that the same reference checks judge every backend.
#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include "hyrun/ep/buffer.hpp"
#include "hyrun/ep/reference_inputs.hpp"
#include "hyrun/worker.hpp"

namespace hyrun::ep::check {

class Engine {
 public:
  Engine(World& world, const Shape& max_shape, Backend backend, std::chrono::milliseconds timeout);
  ~Engine();
  const char* name() const { return buffer_.name(); }
  /// Collective: Buffer::rearm for `shape` (fits in the max shape).
  void begin_shape(const Shape& shape, std::chrono::milliseconds timeout);
  /// Dispatch of this rank's inputs; the outputs end up in `out` (host).
  void dispatch(const RankInputs& in, const Routing& routing, Format f, DispatchBuffers& out);
  /// Combine of `expert_out` [E, R*T, H] (host) for the last dispatch; result in y [T, H].
  void combine(const RankInputs& in, const std::vector<uint16_t>& expert_out, std::vector<uint16_t>& y);
  void fill_region(uint8_t value) { buffer_.fill_region(value); }
  /// End of the run: see Buffer::close_peers (a barrier must follow before destruction).
  void close_peers() { buffer_.close_peers(); }
  std::size_t region_bytes_not(uint8_t value) { return buffer_.region_bytes_not(value); }

  struct DeviceTensors;  // CUDA backends only (ep_engine.cpp)

 private:
  Buffer buffer_;
  DispatchOutput last_{};  // host backend: the handle of the last dispatch
  std::unique_ptr<DeviceTensors> dev_;
};

}  // namespace hyrun::ep::check
