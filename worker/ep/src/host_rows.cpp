#include "hyrun/ep/host_rows.hpp"

// The -O2 vectoriser uses the target's vector width: the x86-64 baseline has 4 float
// lanes, AVX2 8, AVX-512 16. The loops need no intrinsics, only a wider target, so they
// are compiled once per level and the loader picks (GCC function multi-versioning).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define HYRUN_EP_ROW_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
#endif
#ifndef HYRUN_EP_ROW_CLONES
#define HYRUN_EP_ROW_CLONES
#endif

namespace hyrun::ep {

HYRUN_EP_ROW_CLONES void cast_row_fp8_dispatched(const uint16_t* x, int hidden, uint8_t* q, float* scales) {
  cast_row_fp8_fast(x, hidden, q, scales);
}

HYRUN_EP_ROW_CLONES void combine_row_dispatched(const uint16_t* const* rows, const float* weights, int topk,
                                                int hidden, uint16_t* out) {
  combine_row(rows, weights, topk, hidden, out);
}

}  // namespace hyrun::ep
