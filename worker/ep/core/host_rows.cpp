#include "hyrun/ep/host_rows.hpp"

#include <atomic>
#include <cstdint>
#include <cstring>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

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

HYRUN_EP_ROW_CLONES void combine_row_dispatched(const uint16_t* const* rows, const float* weights, int topk, int hidden,
                                                uint16_t* out) {
  combine_row(rows, weights, topk, hidden, out);
}

void stream_row(void* dst, const void* src, std::size_t n) {
#if defined(__x86_64__)
  if (reinterpret_cast<std::uintptr_t>(dst) % 16 == 0 && n % 64 == 0) {
    auto* d = static_cast<__m128i*>(dst);
    const auto* s = static_cast<const __m128i*>(src);
    for (std::size_t i = 0; i < n / 16; i += 4) {  // one cache line per iteration
      const __m128i a = _mm_loadu_si128(s + i), b = _mm_loadu_si128(s + i + 1);
      const __m128i c = _mm_loadu_si128(s + i + 2), e = _mm_loadu_si128(s + i + 3);
      _mm_stream_si128(d + i, a);
      _mm_stream_si128(d + i + 1, b);
      _mm_stream_si128(d + i + 2, c);
      _mm_stream_si128(d + i + 3, e);
    }
    return;
  }
#endif
  std::memcpy(dst, src, n);
}

void store_fence() {
#if defined(__x86_64__)
  _mm_sfence();
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

}  // namespace hyrun::ep
