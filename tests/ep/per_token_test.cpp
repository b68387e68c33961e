// Shared per-token functions: bf16 and FP8 e4m3 conversions, scales, message packing,
// combine reduction.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "hyrun/ep/per_token.hpp"

using namespace hyrun::ep;

namespace {
// e4m3fn from its definition, independent of the implementation under test.
double e4m3_definition(int code) {
  const int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -mag : mag;
}
// Reference encode: nearest representable finite e4m3 value by exhaustive search,
// ties to the even code, saturating to 448.
uint8_t e4m3_reference_encode(float x) {
  if (std::isnan(x)) return 0x7f;
  if (std::fabs(x) >= 448.0f) return std::signbit(x) ? 0xfe : 0x7e;  // satfinite
  const double v = x;
  int best = -1;
  double best_err = 0;
  for (int c = 0; c < 256; ++c) {
    const double d = e4m3_definition(c);
    if (std::isnan(d)) continue;
    if ((c & 0x80) != (std::signbit(x) ? 0x80 : 0)) continue;  // keep the sign (also of zero)
    const double err = std::fabs(d - v);
    if (best < 0 || err < best_err || (err == best_err && (c & 1) == 0 && (best & 1) == 1)) {
      best = c;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(best);
}
}  // namespace

TEST(EpPerToken, Fp8DecodeAll256CodesMatchDefinition) {
  int nans = 0;
  for (int c = 0; c < 256; ++c) {
    const double want = e4m3_definition(c);
    const float got = fp8_e4m3_to_float(static_cast<uint8_t>(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << c;
      ++nans;
    } else {
      EXPECT_EQ(static_cast<double>(got), want) << "code " << c;
      EXPECT_EQ(std::signbit(got), (c & 0x80) != 0) << c;
    }
  }
  EXPECT_EQ(nans, 2);
  EXPECT_EQ(fp8_e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_e4m3_to_float(0x08), std::ldexp(1.0f, -6));
}

TEST(EpPerToken, Fp8EncodeRoundTripsEveryCode) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    EXPECT_EQ(float_to_fp8_e4m3(fp8_e4m3_to_float(static_cast<uint8_t>(c))), c) << c;
  }
}

TEST(EpPerToken, Fp8EncodeSaturatesAndHandlesNaN) {
  EXPECT_EQ(float_to_fp8_e4m3(448.0f), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3(460.0f), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3(464.0f), 0x7e);  // would round to 480 (the NaN code): saturates
  EXPECT_EQ(float_to_fp8_e4m3(1e30f), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3(std::numeric_limits<float>::infinity()), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(float_to_fp8_e4m3(-1e9f), 0xfe);
  EXPECT_EQ(float_to_fp8_e4m3(std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(float_to_fp8_e4m3(-std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(float_to_fp8_e4m3(0.0f), 0x00);
  EXPECT_EQ(float_to_fp8_e4m3(-0.0f), 0x80);
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(1.0f, -11)), 0x00);          // quarter of the smallest subnormal
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(1.0f, -10)), 0x00);          // exactly half: tie to even (0)
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(3.0f, -10)), 0x02);          // 1.5 subnormal steps: tie to even (2)
  EXPECT_EQ(float_to_fp8_e4m3(1.0625f), 0x38);                        // 1 + 1/16: tie between 1 and 1.125 -> 1
  EXPECT_EQ(float_to_fp8_e4m3(1.1875f), 0x3a);                        // tie between 1.125 and 1.25 -> 1.25
  EXPECT_EQ(float_to_fp8_e4m3(std::nextafter(1.0625f, 2.0f)), 0x39);  // just above the tie
}

// The pair conversion packs the first value's code in the low byte (the device's
// instruction is checked against float_to_fp8_e4m3 on every float by ep-cuda-selftest).
TEST(EpPerToken, Fp8PairPacksLowThenHighAndQuantizesEachValue) {
  std::mt19937 rng(77);
  std::uniform_int_distribution<uint32_t> bits;
  for (int n = 0; n < 100000; ++n) {
    const float a = bits_float(bits(rng)), b = bits_float(bits(rng));
    const uint16_t got = floats_to_fp8x2_e4m3(a, b);
    ASSERT_EQ(got & 0xffu, float_to_fp8_e4m3(a)) << float_bits(a);
    ASSERT_EQ(got >> 8, float_to_fp8_e4m3(b)) << float_bits(b);
  }
  const float mult = fp8_quant_multiplier(3.0f);
  for (uint32_t u = 0; u < 0x10000u; ++u) {
    const auto x = static_cast<uint16_t>(u), y = static_cast<uint16_t>(~u);
    const uint16_t got = quantize_fp8x2(x, y, mult);
    ASSERT_EQ(got & 0xffu, quantize_fp8(x, mult)) << u;
    ASSERT_EQ(got >> 8, quantize_fp8(y, mult)) << u;
  }
}

TEST(EpPerToken, Fp8EncodeMatchesExhaustiveNearestOverRandomFloats) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<uint32_t> bits;
  std::uniform_real_distribution<float> mag(-12.0f, 9.5f);
  for (int n = 0; n < 20000; ++n) {
    float x;
    if (n % 2 == 0) {
      x = std::ldexp(1.0f, static_cast<int>(std::floor(mag(rng)))) * (1.0f + (bits(rng) % 1000000) / 1e6f);
      if (n % 4 == 0) x = -x;
    } else {
      x = bits_float(bits(rng));
      if (std::isnan(x)) continue;
    }
    ASSERT_EQ(float_to_fp8_e4m3(x), e4m3_reference_encode(x)) << "x=" << x << " bits=" << std::hex << float_bits(x);
  }
}

TEST(EpPerToken, Fp8RoundTripErrorBound) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 50.0f);
  for (int n = 0; n < 100000; ++n) {
    const float x = nd(rng);
    const float y = fp8_e4m3_to_float(float_to_fp8_e4m3(x));
    const float ax = std::fabs(x);
    if (ax >= 448.0f) {
      EXPECT_EQ(std::fabs(y), 448.0f);
    } else if (ax >= std::ldexp(1.0f, -6)) {
      EXPECT_LE(std::fabs(y - x), ax * (1.0f / 16.0f) + 1e-12f) << x;  // half ulp: 2^-4 relative
    } else {
      EXPECT_LE(std::fabs(y - x), std::ldexp(1.0f, -10)) << x;  // half a subnormal step
    }
  }
}

TEST(EpPerToken, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(bits_float(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(float_to_bf16(bits_float(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(float_to_bf16(bits_float(0x3f808001u)), 0x3f81);  // above the tie
  EXPECT_EQ(float_to_bf16(bits_float(0x3f807fffu)), 0x3f80);  // below the tie
  EXPECT_EQ(float_to_bf16(bits_float(0xbf818000u)), 0xbf82);  // negative tie
  EXPECT_EQ(float_to_bf16(bits_float(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to +inf (as CUDA)
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::quiet_NaN()), 0x7fff);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  for (int v = -256; v <= 256; ++v) EXPECT_EQ(bf16_to_float(float_to_bf16(static_cast<float>(v))), v);
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits;
  for (int n = 0; n < 100000; ++n) {
    const float x = bits_float(bits(rng));
    if (!std::isfinite(x) || std::fabs(x) > 1e38f) continue;
    const float y = bf16_to_float(float_to_bf16(x));
    // nearest: no other bf16 neighbour is closer
    const uint16_t h = float_to_bf16(x);
    const float up = bf16_to_float(static_cast<uint16_t>(h + 1)), dn = bf16_to_float(static_cast<uint16_t>(h - 1));
    if (std::isnan(up) || std::isnan(dn) || (h & 0x7fff) == 0) continue;  // neighbours across zero / NaN
    ASSERT_LE(std::fabs(double(y) - x), std::fabs(double(up) - x)) << x;
    ASSERT_LE(std::fabs(double(y) - x), std::fabs(double(dn) - x)) << x;
  }
}

TEST(EpPerToken, ScaleComputation) {
  EXPECT_EQ(fp8_scale_for_amax(448.0f), 1.0f);
  EXPECT_EQ(fp8_quant_multiplier(448.0f), 1.0f);
  EXPECT_EQ(fp8_scale_for_amax(0.0f), kFp8AmaxFloor / 448.0f);  // guard: never zero
  EXPECT_TRUE(std::isfinite(fp8_quant_multiplier(0.0f)));
  EXPECT_EQ(fp8_scale_for_amax(std::numeric_limits<float>::quiet_NaN()), kFp8AmaxFloor / 448.0f);
  std::vector<uint16_t> blk(128, float_to_bf16(0.0f));
  blk[17] = float_to_bf16(-3.5f);
  blk[90] = float_to_bf16(2.0f);
  EXPECT_EQ(bf16_block_amax(blk.data(), 128), 3.5f);
  // the amax element maps to +-448 exactly
  const float mult = fp8_quant_multiplier(3.5f);
  EXPECT_EQ(quantize_fp8(blk[17], mult), 0xfe);
  // a zero block stays zero
  std::vector<uint16_t> zeros(128, 0);
  std::vector<uint8_t> q(128, 0xAA);
  float scale = -1;
  cast_row_fp8(zeros.data(), 128, q.data(), &scale);
  for (auto c : q) EXPECT_EQ(c, 0);
  EXPECT_GT(scale, 0.0f);
}

TEST(EpPerToken, CastRowRelativeErrorPerBlock) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int H = 1024;
  std::vector<uint16_t> x(H);
  for (int i = 0; i < H; ++i) x[i] = float_to_bf16(nd(rng) * (1 + i / 128));  // blocks of different magnitude
  std::vector<uint8_t> q(H);
  std::vector<float> s(H / 128);
  cast_row_fp8(x.data(), H, q.data(), s.data());
  for (int b = 0; b < H / 128; ++b) {
    const float amax = bf16_block_amax(x.data() + b * 128, 128);
    EXPECT_EQ(s[b], amax / 448.0f);
    for (int i = b * 128; i < (b + 1) * 128; ++i) {
      const float xv = bf16_to_float(x[i]), y = dequantize_fp8(q[i], s[b]);
      EXPECT_LE(std::fabs(y - xv), std::max(std::fabs(xv) / 16.0f, amax / 448.0f * std::ldexp(1.0f, -10)) * 1.0001f)
          << i;
    }
  }
}

TEST(EpPerToken, PackMessages) {
  const int H = 256;
  std::vector<uint16_t> x(H);
  for (int i = 0; i < H; ++i) x[i] = float_to_bf16(static_cast<float>(i % 7) - 3.0f);
  alignas(16) std::vector<std::byte> m(fp8_message_bytes(H));
  pack_message_fp8(x.data(), H, 42, 5, 3, m.data());
  MessageHeader h;
  std::memcpy(&h, m.data(), 16);
  EXPECT_EQ(h.src_token, 42);
  EXPECT_EQ(h.src_topk, 5);
  EXPECT_EQ(h.src_rank, 3);
  EXPECT_EQ(h.magic, kMessageMagic ^ 1);
  const auto* q = reinterpret_cast<const uint8_t*>(m.data() + 16);
  const auto* sc = reinterpret_cast<const float*>(m.data() + 16 + H);
  for (int i = 0; i < H; ++i) {
    EXPECT_EQ(q[i], quantize_fp8(x[i], fp8_quant_multiplier(3.0f))) << i;
    EXPECT_LE(std::fabs(dequantize_fp8(q[i], sc[i / 128]) - bf16_to_float(x[i])), std::fabs(bf16_to_float(x[i])) / 16)
        << i;
  }
  EXPECT_EQ(sc[0], 3.0f / 448.0f);
  EXPECT_EQ(fp8_message_bytes(7168), 7168u + 56 * 4 + 16);
  EXPECT_EQ(bf16_message_bytes(7168), 7168u * 2 + 16);

  std::vector<std::byte> b(bf16_message_bytes(H));
  pack_message_bf16(x.data(), H, 1, 0, 0, b.data());
  std::memcpy(&h, b.data(), 16);
  EXPECT_EQ(h.magic, kMessageMagic ^ 2);
  EXPECT_EQ(std::memcmp(b.data() + 16, x.data(), H * 2), 0);
}

TEST(EpPerToken, CombineChannelWeightedSumInOrder) {
  const uint16_t a[2] = {float_to_bf16(1.0f), float_to_bf16(2.0f)};
  const uint16_t c[2] = {float_to_bf16(-4.0f), float_to_bf16(0.5f)};
  const uint16_t* rows[3] = {a, nullptr, c};
  const float w[3] = {0.5f, 100.0f, 0.25f};
  EXPECT_EQ(bf16_to_float(combine_channel(rows, w, 3, 0)), 0.5f - 1.0f);
  EXPECT_EQ(bf16_to_float(combine_channel(rows, w, 3, 1)), 1.0f + 0.125f);
  const uint16_t* none[2] = {nullptr, nullptr};
  EXPECT_EQ(combine_channel(none, w, 2, 0), 0);
}
