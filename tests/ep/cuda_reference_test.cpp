// The shared per-token conversions against CUDA's own host implementations
// (cuda_fp8.h / cuda_bf16.h, usable from host code without a GPU): FP8 e4m3 encode
// against __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3), decode against
// __nv_cvt_fp8_to_halfraw, bf16 against __float2bfloat16 / __bfloat162float.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "hyrun/ep/per_token.hpp"

using namespace hyrun::ep;

namespace {
uint8_t cuda_fp8(float x) { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); }
uint16_t cuda_bf16(float x) {
  const __nv_bfloat16 b = __float2bfloat16(x);
  uint16_t u;
  std::memcpy(&u, &b, 2);
  return u;
}
}  // namespace

TEST(EpCudaReference, Fp8EncodeMatchesCudaSatfinite) {
  const float specials[] = {0.0f,
                            -0.0f,
                            448.0f,
                            -448.0f,
                            464.0f,
                            479.9f,
                            480.0f,
                            1e30f,
                            -1e30f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            std::ldexp(1.0f, -10),
                            std::ldexp(3.0f, -10),
                            std::ldexp(1.0f, -6),
                            std::ldexp(1.0f, -11),
                            1.0625f,
                            1.1875f};
  for (float x : specials) EXPECT_EQ(float_to_fp8_e4m3(x), cuda_fp8(x)) << x;
  // every 127th bit pattern of all 2^32 floats, plus random ones
  for (uint64_t u = 0; u < (1ull << 32); u += 127) {
    const float x = bits_float(static_cast<uint32_t>(u));
    ASSERT_EQ(float_to_fp8_e4m3(x), cuda_fp8(x)) << std::hex << u;
  }
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> m(-500.0f, 500.0f);
  for (int n = 0; n < 1000000; ++n) {
    const float x = n % 2 ? m(rng) : m(rng) * 1e-3f;
    ASSERT_EQ(float_to_fp8_e4m3(x), cuda_fp8(x)) << x;
  }
}

TEST(EpCudaReference, Fp8DecodeMatchesCuda) {
  for (int c = 0; c < 256; ++c) {
    const __half_raw hr = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(c), __NV_E4M3);
    const __half h(hr);
    const float want = __half2float(h);
    const float got = fp8_e4m3_to_float(static_cast<uint8_t>(c));
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(got)) << c;
    else
      EXPECT_EQ(got, want) << c;
  }
}

TEST(EpCudaReference, Bf16MatchesCuda) {
  for (uint64_t u = 0; u < (1ull << 32); u += 131) {
    const float x = bits_float(static_cast<uint32_t>(u));
    ASSERT_EQ(float_to_bf16(x), cuda_bf16(x)) << std::hex << u;
  }
  for (uint32_t h = 0; h < 65536; ++h) {
    __nv_bfloat16_raw r;
    r.x = static_cast<unsigned short>(h);
    const float want = __bfloat162float(__nv_bfloat16(r));
    const float got = bf16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(got)) << h;
    else
      EXPECT_EQ(got, want) << h;
  }
}
