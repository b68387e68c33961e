#pragma once
// The reference checks of the low-latency EP test (DeepEP test_low_latency.py / NIXL
// elastic.py), applied to every element of one rank's outputs:
//  dispatch: recv_count[e] and layout_count[e][src] equal the selections of that expert
//    counted from every active rank's routing; each received row's (source token, top-k
//    slot) is the j-th selection of that expert by that source in (token, k) order; the
//    row, dequantized to bf16, holds src - 128 in every channel but the last 128 and the
//    source token index in those; nothing is NaN.
//  combine with identity experts: y equals x * (sum of the token's valid weights):
//    diff = 1 - 2*sum(a*b)/sum(a*a + b*b) over a = x*w + 1, b = y + 1 must stay below
//    9e-4 (FP8) or 1e-5 (BF16); no NaN; in addition every element must be within 1e-2
//    relative (bf16 rounding is 4e-3) so that a single wrong element cannot hide in the sum.
#include <string>
#include <vector>

#include "hyrun/ep/host_backend.hpp"
#include "hyrun/ep/reference_inputs.hpp"

namespace hyrun::ep::check {

/// Threshold of the reference combine check.
double combine_threshold(Format f);

struct CheckReport {
  bool ok = true;
  double combine_diff = 0.0;          ///< the reference diff of the combine
  double max_elem_rel = 0.0;          ///< largest element-wise relative error of the combine
  std::size_t rows_checked = 0;       ///< received rows checked (dispatch)
  std::vector<std::string> problems;  ///< the first few failures, readable
  void fail(std::string what);
};

/// Checks rank `me`'s dispatch outputs. `shape` is the shape the buffers were made for
/// (max_ranks, tokens = the case's, ...), `all[r]` rank r's inputs, `routing` the call's.
void check_dispatch(const Shape& shape, Format f, int me, const Routing& routing, const std::vector<RankInputs>& all,
                    const DispatchBuffers& out, CheckReport& report);

/// Identity experts: each received row dequantized to bf16 (the reference's cast back),
/// at the same row positions; other rows zero.
std::vector<uint16_t> identity_expert_out(const Shape& shape, Format f, const DispatchBuffers& out);

/// Checks rank `me`'s combine output y [T, H] against its own inputs.
void check_combine(const Shape& shape, Format f, const Routing& routing, const RankInputs& mine,
                   const std::vector<uint16_t>& y, CheckReport& report);

}  // namespace hyrun::ep::check
