#pragma once
// One rank's EP inputs and outputs for the largest shape, in CUDA memory: in device memory,
// what a program that drives a CUDA Buffer (ep-check, ep-bench) uploads, passes to
// dispatch/combine and downloads to check; in pinned host memory, the staged path's copies
// of them. Needs the CUDA runtime headers (library hyrun_ep_cuda).
#include <cstddef>
#include <cstdint>

#include "hyrun/ep/cuda_memory.hpp"
#include "hyrun/ep/host_backend.hpp"
#include "hyrun/ep/layout.hpp"

namespace hyrun::ep::cuda {

template <template <class> class Array>
struct EpTensors {
  /// `format` sizes the received rows (BF16 has room for either format).
  EpTensors(const Shape& s, Format format)
      : x(static_cast<std::size_t>(s.max_tokens) * s.hidden),
        topk_idx(static_cast<std::size_t>(s.max_tokens) * s.topk),
        weights(topk_idx.size()),
        recv_x(recv_x_bytes(s, format)),
        recv_scales(recv_scales_count(s)),
        src_token(recv_rows(s)),
        src_topk(recv_rows(s)),
        layout_count(static_cast<std::size_t>(s.experts_per_rank) * s.max_ranks),
        recv_count(static_cast<std::size_t>(s.experts_per_rank)),
        expert_out(recv_rows(s) * s.hidden),
        y(x.size()) {}

  /// The dispatch outputs as the backends take them.
  DispatchOutput view() const {
    return DispatchOutput{recv_x.get(),   recv_scales.get(),  src_token.get(),
                          src_topk.get(), layout_count.get(), recv_count.get()};
  }

  Array<uint16_t> x;
  Array<int64_t> topk_idx;
  Array<float> weights;
  Array<uint8_t> recv_x;
  Array<float> recv_scales;
  Array<int32_t> src_token, src_topk, layout_count, recv_count;
  Array<uint16_t> expert_out, y;
};

using DeviceTensors = EpTensors<DeviceArray>;
using PinnedTensors = EpTensors<PinnedArray>;

}  // namespace hyrun::ep::cuda
