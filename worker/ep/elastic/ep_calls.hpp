#pragma once
// The elastic benchmark's dispatch + combine calls on one rank, in the memory of the
// Buffer's backend: host vectors for the host backend, device arrays on the Buffer's
// stream for the CUDA backends (inputs uploaded once per phase). Timing as the
// reference does it: CUDA events around dispatch + combine with the L2 flushed before
// each sample on the GPU; the steady clock on the host.
#include <memory>
#include <vector>

#include "hyrun/ep/buffer.hpp"
#include "hyrun/ep/reference_checks.hpp"
#include "hyrun/ep/reference_inputs.hpp"

namespace hyrun::ep::elastic {

/// One timed dispatch + combine, in microseconds; dispatch + combine = total.
struct CallTimes {
  double total_us = 0, dispatch_us = 0, combine_us = 0;
};

class EpCalls {
 public:
  /// `shape`: the Buffer's shape; `flush_l2`: flush the L2 before every timed call (GPU).
  EpCalls(Buffer& buffer, const Shape& shape, Format format, bool flush_l2 = true);
  ~EpCalls();
  EpCalls(const EpCalls&) = delete;
  EpCalls& operator=(const EpCalls&) = delete;

  /// This rank's inputs of the phase (tokens = the shape's max_tokens).
  void set_inputs(const check::RankInputs& inputs);
  /// One dispatch + combine; returns its durations. Throws what
  /// Buffer::dispatch/combine throw (PeerFailureError, PeerTimeoutError, Error).
  CallTimes timed_call(int num_tokens, const Routing& routing);
  /// --validate: outputs poisoned, dispatch, the reference checks on every element,
  /// identity experts, combine, the combine checks. `all[r]`: rank r's inputs.
  check::CheckReport validate(int me, int num_tokens, const Routing& routing,
                              const std::vector<check::RankInputs>& all);

  struct Device;  // the CUDA backends' tensors (ep_calls.cpp)

 private:
  Buffer& buffer_;
  Shape shape_;
  Format format_;
  check::RankInputs inputs_;
  DispatchBuffers out_;
  std::vector<uint16_t> expert_out_, y_;
  std::unique_ptr<Device> dev_;
};

}  // namespace hyrun::ep::elastic
