#pragma once
// Per-token functions of the expert-parallel (EP) core, one definition shared by the
// host backend and the CUDA kernels. Every function is HYRUN_HD inline: it compiles
// with plain g++ (host only) and with nvcc (host and device).
//
// Bit-exactness between the backends: every float product and sum goes through
// ep_mul()/ep_add(), which are __fmul_rn/__fadd_rn on the device (no FMA contraction)
// and plain IEEE float operations on the host (hyrun_ep is built with
// -ffp-contract=off), so both backends produce identical bits for identical inputs.
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define HYRUN_HD __host__ __device__
#define HYRUN_HD_INLINE __host__ __device__ __forceinline__
#else
#define HYRUN_HD
#define HYRUN_HD_INLINE inline
#endif

namespace hyrun::ep {

/// Largest finite FP8 e4m3 ("e4m3fn": no infinities, S.1111.111 is NaN) magnitude.
inline constexpr float kFp8Max = 448.0f;
/// Lower bound of a block's amax before the scale is computed (DeepEP's margin): a
/// block of zeros gets a finite, non-zero scale instead of a division by zero.
inline constexpr float kFp8AmaxFloor = 1e-4f;
/// Channels per FP8 scale.
inline constexpr int kScaleBlock = 128;
/// Size of the message header that precedes every dispatched payload.
inline constexpr std::size_t kMessageHeaderBytes = 16;

// ---------------------------------------------------------------- bit helpers
// The primitives whose code differs between nvcc's device pass and the host, in one switch:
//  * float_bits / bits_float: the bits of a float, and the float of given bits;
//  * ep_mul: a*b rounded to nearest even, never fused with a following add;
//  * ep_add: a+b rounded to nearest even, never fused with a preceding multiply.
#if defined(__CUDA_ARCH__)
HYRUN_HD_INLINE uint32_t float_bits(float f) { return __float_as_uint(f); }
HYRUN_HD_INLINE float bits_float(uint32_t u) { return __uint_as_float(u); }
HYRUN_HD_INLINE float ep_mul(float a, float b) { return __fmul_rn(a, b); }
HYRUN_HD_INLINE float ep_add(float a, float b) { return __fadd_rn(a, b); }
#else
/// The bits of `from` read as a `To` of the same size (std::bit_cast is C++20; nvcc builds
/// this header as C++17).
template <class To, class From>
HYRUN_HD_INLINE To host_bit_cast(From from) {
  static_assert(sizeof(To) == sizeof(From), "host_bit_cast: sizes differ");
  To to;
  std::memcpy(&to, &from, sizeof to);
  return to;
}
HYRUN_HD_INLINE uint32_t float_bits(float f) { return host_bit_cast<uint32_t>(f); }
HYRUN_HD_INLINE float bits_float(uint32_t u) { return host_bit_cast<float>(u); }
HYRUN_HD_INLINE float ep_mul(float a, float b) { return a * b; }
HYRUN_HD_INLINE float ep_add(float a, float b) { return a + b; }
#endif
HYRUN_HD_INLINE float ep_abs(float a) { return bits_float(float_bits(a) & 0x7fffffffu); }
/// max that ignores a NaN operand only when the other is a number (like fmaxf).
HYRUN_HD_INLINE float ep_max(float a, float b) {
  if (a != a) return b;
  if (b != b) return a;
  return a > b ? a : b;
}

// ---------------------------------------------------------------- bf16
/// bfloat16 bits -> float (exact).
HYRUN_HD_INLINE float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

/// float -> bfloat16 bits, round to nearest, ties to even; NaN -> 0x7FFF (the canonical
/// NaN of CUDA's __float2bfloat16); overflow rounds to +-infinity like CUDA.
HYRUN_HD_INLINE uint16_t float_to_bf16(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
  uint32_t upper = x >> 16;
  uint32_t rem = x & 0xffffu;
  if (rem > 0x8000u || (rem == 0x8000u && (upper & 1u))) ++upper;
  return static_cast<uint16_t>(upper);
}

// ---------------------------------------------------------------- fp8 e4m3
/// FP8 e4m3 code -> float (exact). 0x7F/0xFF are NaN; there are no infinities.
HYRUN_HD_INLINE float fp8_e4m3_to_float(uint8_t c) {
  const uint32_t sign = static_cast<uint32_t>(c & 0x80u) << 24;
  const uint32_t e = (c >> 3) & 0xfu;
  const uint32_t m = c & 0x7u;
  if (e == 0xfu && m == 0x7u) return bits_float(sign | 0x7fc00000u);
  if (e == 0) {
    // subnormal: m * 2^-9, exact in float
    float v = static_cast<float>(m) * (1.0f / 512.0f);
    return bits_float(float_bits(v) | sign);
  }
  // normal: exponent e-7 -> float exponent e-7+127 = e+120
  return bits_float(sign | ((e + 120u) << 23) | (m << 20));
}

/// float -> FP8 e4m3 code, round to nearest, ties to even, saturating to +-448 (also for
/// +-infinity), NaN -> 0x7F: the behaviour of
/// __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3).
HYRUN_HD_INLINE uint8_t float_to_fp8_e4m3(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t a = x & 0x7fffffffu;
  const uint8_t sign = static_cast<uint8_t>((x >> 24) & 0x80u);
  if (a > 0x7f800000u) return 0x7f;          // NaN
  if (a >= 0x43e00000u) return sign | 0x7e;  // >= 448 (and inf): saturate
  if (a < 0x3c800000u) {                     // below 2^-6: subnormal range
    // value / 2^-9 in [0, 8): exact multiply, then round half to even
    const float t = bits_float(a) * 512.0f;
    uint32_t q = static_cast<uint32_t>(t);
    const float r = t - static_cast<float>(q);
    if (r > 0.5f || (r == 0.5f && (q & 1u))) ++q;  // q == 8 is the smallest normal, 0x08
    return sign | static_cast<uint8_t>(q);
  }
  const uint32_t e = (a >> 23) - 120u;  // e4m3 biased exponent, 1..15
  const uint32_t mant = a & 0x7fffffu;
  uint32_t code = (e << 3) | (mant >> 20);
  const uint32_t rem = mant & 0xfffffu;
  if (rem > 0x80000u || (rem == 0x80000u && (code & 1u))) ++code;  // carries into exponent
  if (code > 0x7eu) code = 0x7eu;                                  // cannot happen below 448; defensive
  return sign | static_cast<uint8_t>(code);
}

// ---------------------------------------------------------------- scales
/// Dequantization scale of one 128-channel block from its amax (max |x|):
/// max(amax, 1e-4) / 448. The payload is x * fp8_quant_multiplier(amax) encoded to FP8;
/// the receiver gets back x ~= fp8 * scale.
HYRUN_HD_INLINE float fp8_scale_for_amax(float amax) {
  const float a = amax > kFp8AmaxFloor ? amax : kFp8AmaxFloor;  // also maps NaN to the floor
  return a / kFp8Max;
}
/// Multiplier applied before encoding: 448 / max(amax, 1e-4).
HYRUN_HD_INLINE float fp8_quant_multiplier(float amax) {
  const float a = amax > kFp8AmaxFloor ? amax : kFp8AmaxFloor;
  return kFp8Max / a;
}
/// amax of `n` bf16 values.
HYRUN_HD_INLINE float bf16_block_amax(const uint16_t* x, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) m = ep_max(m, ep_abs(bf16_to_float(x[i])));
  return m;
}
/// Quantizes one bf16 value with a block's multiplier.
HYRUN_HD_INLINE uint8_t quantize_fp8(uint16_t x, float multiplier) {
  return float_to_fp8_e4m3(ep_mul(bf16_to_float(x), multiplier));
}
/// Two floats -> two FP8 e4m3 codes, `lo`'s in the low byte: float_to_fp8_e4m3 of each.
/// On a device of compute capability 8.9 or later one `cvt.rn.satfinite.e4m3x2.f32`
/// does both (the software loop above is about twenty instructions a value, with
/// branches that diverge within a warp); ep-cuda-selftest checks on the GPU that the
/// instruction gives float_to_fp8_e4m3's bits for every one of the 2^32 floats.
HYRUN_HD_INLINE uint16_t floats_to_fp8x2_e4m3(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint16_t codes;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(codes) : "f"(hi), "f"(lo));
  return codes;
#else
  return static_cast<uint16_t>(float_to_fp8_e4m3(lo) | (static_cast<uint16_t>(float_to_fp8_e4m3(hi)) << 8));
#endif
}
/// Quantizes two bf16 values of one block with the block's multiplier (quantize_fp8 of
/// each; `a`'s code in the low byte).
HYRUN_HD_INLINE uint16_t quantize_fp8x2(uint16_t a, uint16_t b, float multiplier) {
  return floats_to_fp8x2_e4m3(ep_mul(bf16_to_float(a), multiplier), ep_mul(bf16_to_float(b), multiplier));
}
/// Dequantizes one FP8 value with its block's scale.
HYRUN_HD_INLINE float dequantize_fp8(uint8_t q, float scale) { return ep_mul(fp8_e4m3_to_float(q), scale); }

/// Casts one row of `hidden` bf16 values (hidden % 128 == 0) to FP8 plus hidden/128
/// float scales. The reference loop; the CUDA kernels call the per-value functions above
/// in the same order of operations, the host backend runs the vectorisable
/// cast_row_fp8_fast (host_rows.hpp), proven to give the same bits.
HYRUN_HD_INLINE void cast_row_fp8(const uint16_t* x, int hidden, uint8_t* q, float* scales) {
  for (int b = 0; b < hidden / kScaleBlock; ++b) {
    const uint16_t* xb = x + b * kScaleBlock;
    const float amax = bf16_block_amax(xb, kScaleBlock);
    const float mult = fp8_quant_multiplier(amax);
    scales[b] = fp8_scale_for_amax(amax);
    for (int i = 0; i < kScaleBlock; ++i) q[b * kScaleBlock + i] = quantize_fp8(xb[i], mult);
  }
}

// ---------------------------------------------------------------- messages
/// The 16-byte header that starts every dispatched (token, expert) message.
struct MessageHeader {
  int32_t src_token;  ///< index of the token in the source rank's x
  int32_t src_topk;   ///< which of the token's top-k selections this is (0..K-1)
  int32_t src_rank;   ///< the sending rank
  int32_t magic;      ///< kMessageMagic ^ format, to catch reads of stale or foreign slots
};
static_assert(sizeof(MessageHeader) == kMessageHeaderBytes);
inline constexpr int32_t kMessageMagic = 0x45503031;  // "EP01"

/// Bytes of one FP8 message: header + hidden FP8 bytes + hidden/128 float scales.
HYRUN_HD_INLINE std::size_t fp8_message_bytes(int hidden) {
  return kMessageHeaderBytes + static_cast<std::size_t>(hidden) + static_cast<std::size_t>(hidden / kScaleBlock) * 4;
}
/// Bytes of one BF16 message: header + hidden bf16 values.
HYRUN_HD_INLINE std::size_t bf16_message_bytes(int hidden) {
  return kMessageHeaderBytes + static_cast<std::size_t>(hidden) * 2;
}

/// Writes the header of one (token, expert) selection's message into `msg`, its magic
/// marking `format` (1 FP8, 2 BF16); returns where the payload starts.
HYRUN_HD_INLINE uint8_t* write_message_header(void* msg, int32_t src_token, int32_t src_topk, int32_t src_rank,
                                              int32_t format) {
  *static_cast<MessageHeader*>(msg) = MessageHeader{src_token, src_topk, src_rank, kMessageMagic ^ format};
  return static_cast<uint8_t*>(msg) + kMessageHeaderBytes;
}
/// Writes the FP8 message of one (token, expert) selection into `msg`
/// (fp8_message_bytes(hidden) bytes, 16-byte aligned): header, payload, scales.
HYRUN_HD_INLINE void pack_message_fp8(const uint16_t* x_row, int hidden, int32_t src_token, int32_t src_topk,
                                      int32_t src_rank, void* msg) {
  uint8_t* q = write_message_header(msg, src_token, src_topk, src_rank, 1);
  cast_row_fp8(x_row, hidden, q, reinterpret_cast<float*>(q + hidden));
}
/// BF16 variant: header followed by the row unchanged.
HYRUN_HD_INLINE void pack_message_bf16(const uint16_t* x_row, int hidden, int32_t src_token, int32_t src_topk,
                                       int32_t src_rank, void* msg) {
  auto* out = reinterpret_cast<uint16_t*>(write_message_header(msg, src_token, src_topk, src_rank, 2));
  for (int i = 0; i < hidden; ++i) out[i] = x_row[i];
}

// ---------------------------------------------------------------- routing
/// The mask applied to every selection before counting and sending: the global expert
/// `idx` if it is >= 0, below num_ranks * experts_per_rank and its rank is active
/// (active == nullptr: every rank), else -1.
HYRUN_HD_INLINE int64_t mask_expert(int64_t idx, int experts_per_rank, int num_ranks, const uint8_t* active) {
  if (idx < 0 || idx >= static_cast<int64_t>(num_ranks) * experts_per_rank) return -1;
  if (active != nullptr && active[idx / experts_per_rank] == 0) return -1;
  return idx;
}

// ---------------------------------------------------------------- combine
/// One step of the combine reduction: acc + weight * value (no FMA).
HYRUN_HD_INLINE float combine_accumulate(float acc, uint16_t expert_out_bf16, float weight) {
  return ep_add(acc, ep_mul(bf16_to_float(expert_out_bf16), weight));
}
/// Weighted reduction of one output channel over the token's selections, in
/// selection order k = 0..K-1; rows[k] == nullptr marks a dropped selection.
HYRUN_HD_INLINE uint16_t combine_channel(const uint16_t* const* rows, const float* weights, int topk, int channel) {
  float acc = 0.0f;
  for (int k = 0; k < topk; ++k)
    if (rows[k] != nullptr) acc = combine_accumulate(acc, rows[k][channel], weights[k]);
  return float_to_bf16(acc);
}

}  // namespace hyrun::ep
