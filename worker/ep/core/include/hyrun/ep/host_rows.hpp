#pragma once
// Whole-row host versions of the per-token functions (per_token.hpp), written for the
// compiler's vectoriser: branch-free loops over fixed-size blocks of integers and floats
// (GCC vectorises them at -O2 with the x86-64 baseline, SSE2). Host only.
//
// Contract: every function here returns exactly the bits of its per-token counterpart,
// which the CUDA kernels use (tests/ep/test_host_rows.cpp proves it: every bf16 input of
// the casts, a structured sweep of float encodings, random blocks of the reductions):
//   fp8_e4m3_encode_branchless(f) == float_to_fp8_e4m3(f)
//   bf16_round_branchless(f)      == float_to_bf16(f)
//   cast_row_fp8_fast(...)        == cast_row_fp8(...)
//   combine_row(...)[c]           == combine_channel(..., c) for every channel c
// The order of the float operations is the shared one (multiply, then add, per channel
// in selection order, never fused: hyrun_ep builds with -ffp-contract=off).
#include <bit>
#include <cstdint>

#include "hyrun/ep/per_token.hpp"

namespace hyrun::ep {

namespace detail {
// Selections written as masks: GCC's -O2 vectoriser rejects the same code written with ?:
// ("control flow in loop") but vectorises and/or/andnot.
inline int32_t mask_if(bool c) { return -static_cast<int32_t>(c); }
inline int32_t select(int32_t mask, int32_t a, int32_t b) { return (mask & a) | (~mask & b); }
}  // namespace detail

/// float -> FP8 e4m3 code (round to nearest even, saturating, NaN -> 0x7F) computed on
/// every path and selected, so that a loop of it has no branches.
inline uint8_t fp8_e4m3_encode_branchless(float f) {
  using detail::mask_if, detail::select;
  const uint32_t x = std::bit_cast<uint32_t>(f);
  // Signed: the vectoriser has signed 32-bit compares everywhere (SSE2), and |x| < 2^31.
  const int32_t a = static_cast<int32_t>(x & 0x7fffffffu);
  const int32_t sign = static_cast<int32_t>((x >> 24) & 0x80u);
  // Normal e4m3 range: exponent and top 3 mantissa bits are a >> 20, rebased by 120 << 3;
  // adding 0x7FFFF plus the kept lsb carries exactly when rounding to nearest even rounds up.
  // Unsigned: for |f| near the top (infinities, NaN) the sum passes 2^31, which is undefined
  // behaviour in int32_t (UBSan); those lanes are replaced below, and below 2^31 the bits agree.
  const uint32_t ua = x & 0x7fffffffu;
  const int32_t normal = static_cast<int32_t>((ua + 0x7ffffu + ((ua >> 20) & 1u)) >> 20) - (120 << 3);
  // Subnormal range: |f| * 2^9 in [0, 8) is exact; adding 1.5 * 2^23 rounds it to an
  // integer (nearest even: the default rounding mode) held in the low mantissa bits.
  const float t = std::bit_cast<float>(a) * 512.0f + 12582912.0f;
  const int32_t sub = std::bit_cast<int32_t>(t) - 0x4b400000;
  int32_t code = select(mask_if(a < 0x3c800000), sub, normal);
  code = select(mask_if(a >= 0x43e00000), 0x7e, code);                              // >= 448 and infinities saturate
  return static_cast<uint8_t>(select(mask_if(a > 0x7f800000), 0x7f, sign | code));  // NaN: 0x7F, no sign
}

/// float -> bfloat16 bits, round to nearest even, NaN -> 0x7FFF, without branches.
inline uint16_t bf16_round_branchless(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const int32_t rounded = static_cast<int32_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
  const bool nan = static_cast<int32_t>(x & 0x7fffffffu) > 0x7f800000;
  return static_cast<uint16_t>(detail::select(detail::mask_if(nan), 0x7fff, rounded));
}

/// amax of one 128-channel block as cast_row_fp8 computes it (NaN ignored), on the bf16
/// bits: for non-NaN values |x| orders like its bits.
inline float bf16_block_amax_fast(const uint16_t* x) {
  int16_t m = 0;
  for (int i = 0; i < kScaleBlock; ++i) {
    const int16_t a = static_cast<int16_t>(x[i] & 0x7fff);
    const int16_t v = a > 0x7f80 ? int16_t{0} : a;  // NaN -> 0, which never wins
    m = v > m ? v : m;
  }
  return bf16_to_float(static_cast<uint16_t>(m));
}

/// cast_row_fp8 (hidden % 128 == 0): FP8 codes into q[hidden], scales into
/// scales[hidden / 128]; identical bits. x and q must not overlap.
inline void cast_row_fp8_fast(const uint16_t* __restrict x, int hidden, uint8_t* __restrict q, float* scales) {
  for (int b = 0; b < hidden / kScaleBlock; ++b) {
    const uint16_t* __restrict xb = x + b * kScaleBlock;
    uint8_t* __restrict qb = q + b * kScaleBlock;
    const float amax = bf16_block_amax_fast(xb);
    const float mult = fp8_quant_multiplier(amax);
    scales[b] = fp8_scale_for_amax(amax);
    for (int i = 0; i < kScaleBlock; ++i) qb[i] = fp8_e4m3_encode_branchless(bf16_to_float(xb[i]) * mult);
  }
}

/// Channels of the combine reduction that one pass over the rows accumulates: few enough
/// that the accumulators stay in vector registers (SSE2 included).
inline constexpr int kCombineChunk = 32;

/// The combine reduction of one token over all channels (hidden % 32 == 0): out[c] =
/// combine_channel(rows, weights, topk, c) for every c < hidden. For each chunk of 32
/// channels the rows are read in selection order, so every channel is accumulated in the
/// shared order. `out` must not overlap the rows.
inline void combine_row(const uint16_t* const* rows, const float* weights, int topk, int hidden,
                        uint16_t* __restrict out) {
  for (int b = 0; b < hidden; b += kCombineChunk) {
    float acc[kCombineChunk];
    for (int c = 0; c < kCombineChunk; ++c) acc[c] = 0.0f;
    for (int k = 0; k < topk; ++k) {
      const uint16_t* __restrict r = rows[k];
      if (r == nullptr) continue;
      const float w = weights[k];
      for (int c = 0; c < kCombineChunk; ++c) acc[c] = acc[c] + bf16_to_float(r[b + c]) * w;
    }
    for (int c = 0; c < kCombineChunk; ++c) out[b + c] = bf16_round_branchless(acc[c]);
  }
}

}  // namespace hyrun::ep

namespace hyrun::ep {

/// cast_row_fp8_fast and combine_row compiled for several x86-64 levels (baseline, v3 =
/// AVX2, v4 = AVX-512), the best one for this CPU chosen when the library loads; plain
/// calls of the inline versions elsewhere. Same contract and bits as the inline versions.
void cast_row_fp8_dispatched(const uint16_t* x, int hidden, uint8_t* q, float* scales);
void combine_row_dispatched(const uint16_t* const* rows, const float* weights, int topk, int hidden, uint16_t* out);

/// memcpy for a row stored into another rank's region: with non-temporal stores (x86-64)
/// when `dst` is 16-aligned and `n` a multiple of 64, else a plain memcpy. The line goes
/// to memory without first being read into this core's cache, where the peer that reads
/// it last time still holds it (measured on the 2-core VM: min_t of 2 ranks over shm
/// 13 % lower). Non-temporal stores are weakly ordered: call store_fence() before
/// publishing them (a flag, a signal).
void stream_row(void* dst, const void* src, std::size_t n);
/// Orders every earlier stream_row store before later stores (sfence on x86-64).
void store_fence();

}  // namespace hyrun::ep
