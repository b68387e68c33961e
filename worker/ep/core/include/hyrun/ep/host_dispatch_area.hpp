#pragma once
// How the host backend uses the dispatch-data part of the receive region
// (RegionLayout::dispatch_data, E*R*T slots of dispatch_slot_bytes(H) = 16 + 2H bytes).
//
// The CUDA kernels keep one slot per message, header and payload together. The host
// backend splits the same bytes into three arrays, each indexed by the row of recv_x,
// row = (e * R + src) * T + j (local expert e, source rank src, j-th message):
//
//   x        [E*R*T][H] FP8 codes, or [E*R*T][H] bf16    -- recv_x's layout
//   scales   [E*R*T][H/128] float (FP8 only)             -- recv_scales' layout
//   headers  [E*R*T] MessageHeader
//
// so that a sender stores each payload row exactly where the receiver's recv_x expects it:
// a receiver that uses these arrays as its recv_x / recv_scales (HostBackend::region_rows,
// like DeepEP's packed_recv_x, which is the receive buffer itself) copies nothing, and a
// receiver with its own recv_x copies each (expert, source) block in one memcpy.
// Sizes: FP8 E*R*T*(H + H/32 + 16) and BF16 E*R*T*(2H + 16) bytes, both within the slots'
// E*R*T*(2H + 16). x starts 64-aligned and holds a multiple of 128 bytes, so scales and
// headers are 4-aligned (their fields are int32/float).
#include <cstddef>

#include "hyrun/ep/layout.hpp"

namespace hyrun::ep {

struct HostDispatchArea {
  std::size_t x = 0;           ///< region offset of row 0 of the payload array
  std::size_t scales = 0;      ///< region offset of the scales array (FP8; == headers for BF16)
  std::size_t headers = 0;     ///< region offset of the MessageHeader array
  std::size_t x_row = 0;       ///< bytes of one payload row: H (FP8) or 2H (BF16)
  std::size_t scales_row = 0;  ///< bytes of one row's scales: H/128 * 4 (FP8) or 0 (BF16)
};

inline HostDispatchArea host_dispatch_area(const Shape& s, const RegionLayout& l, Format f) {
  const std::size_t rows = recv_rows(s);
  HostDispatchArea a;
  a.x_row = static_cast<std::size_t>(s.hidden) * (f == Format::kFP8 ? 1 : 2);
  a.scales_row = f == Format::kFP8 ? static_cast<std::size_t>(s.hidden / kScaleBlock) * sizeof(float) : 0;
  a.x = l.dispatch_data;
  a.scales = a.x + rows * a.x_row;
  a.headers = a.scales + rows * a.scales_row;
  return a;
}

}  // namespace hyrun::ep
