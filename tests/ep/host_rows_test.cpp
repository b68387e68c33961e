// The host backend's vectorisable row functions (host_rows.hpp) against the per-token
// functions that the CUDA kernels run (per_token.hpp): identical bits, over every bf16
// input of the casts, a sweep of float encodings around every rounding point, and random
// blocks for the amax and the combine reduction (NaN, infinities, zeros, subnormals).
// The row functions are checked as inlined here and as the library runs them (the
// *_dispatched versions, compiled for this CPU's widest vectors).
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <initializer_list>
#include <numeric>
#include <random>
#include <vector>

#include "hyrun/ep/host_rows.hpp"
#include "hyrun/ep/per_token.hpp"

using namespace hyrun::ep;

namespace {
// Multipliers as cast_row computes them, from amax values over the whole range: the
// floor, the FP8 limit, powers of two, values that make x * mult land near 448 and in the
// FP8 subnormal range, the largest bf16, and random ones.
std::vector<float> multipliers() {
  std::vector<float> amax = {0.0f,       1e-30f, 1e-4f,  1.5e-4f, 1.0f,     3.5f,
                             0.0078125f, 447.0f, 448.0f, 449.0f,  65504.0f, 3.3895314e38f};
  std::mt19937 g(7);
  std::uniform_int_distribution<uint32_t> bits(0x30000000u, 0x7f000000u);  // positive, 2^-31 .. 2^127
  for (int i = 0; i < 20; ++i) amax.push_back(std::bit_cast<float>(bits(g)));
  std::vector<float> m;
  for (float a : amax) m.push_back(fp8_quant_multiplier(a));
  return m;
}

// A bf16 value drawn to hit the special cases often: NaN, infinities, zeros,
// subnormals, and ordinary values of every magnitude.
uint16_t random_bf16(std::mt19937& g) {
  switch (std::uniform_int_distribution<int>(0, 15)(g)) {
    case 0: return 0x7fc0;                                                // NaN
    case 1: return static_cast<uint16_t>(0xff80 | (g() & 0x7f) | 1);      // NaN with payload, negative
    case 2: return g() & 1 ? 0x7f80 : 0xff80;                             // +-inf
    case 3: return g() & 1 ? 0x0000 : 0x8000;                             // +-0
    case 4: return static_cast<uint16_t>((g() & 0x8000) | (g() & 0x7f));  // subnormal
    default: return static_cast<uint16_t>(g());
  }
}
uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }

// `row(f) == shared(f)` for every float whose bits above the low `low_bits` take every
// value and whose low bits take each of `lows`; a failure names the first float that differs.
template <class Row, class Shared>
void expect_equal_around_rounding_points(int low_bits, std::initializer_list<uint32_t> lows, Row row, Shared shared) {
  uint64_t mismatches = 0;
  uint32_t first = 0;
  for (uint32_t hi = 0; hi < (1u << (32 - low_bits)); ++hi)
    for (uint32_t low : lows) {
      const uint32_t bits = hi << low_bits | low;
      const float f = std::bit_cast<float>(bits);
      if (row(f) != shared(f) && mismatches++ == 0) first = bits;
    }
  EXPECT_EQ(mismatches, 0u) << "first mismatch at float bits 0x" << std::hex << first;
}
}  // namespace

TEST(EpHostRows, Fp8EncodeEqualsSharedEncodeAroundEveryRoundingPoint) {
  // Bits 11..31 exhaustively (sign, exponent, the kept mantissa bits, the rounding bit
  // and the upper sticky bits at every exponent), the low 11 bits at their edges.
  expect_equal_around_rounding_points(
      11, {0x000, 0x001, 0x3ff, 0x400, 0x7ff}, [](float f) { return fp8_e4m3_encode_branchless(f); },
      [](float f) { return float_to_fp8_e4m3(f); });
}

TEST(EpHostRows, Bf16RoundEqualsSharedRoundAroundEveryRoundingPoint) {
  // Bits 12..31 exhaustively, the low 12 bits (those rounded away) at their edges.
  expect_equal_around_rounding_points(
      12, {0x000, 0x001, 0x7ff, 0x800, 0x801, 0xfff}, [](float f) { return bf16_round_branchless(f); },
      [](float f) { return float_to_bf16(f); });
}

TEST(EpHostRows, QuantizeEveryBf16InputEqualsSharedQuantize) {
  for (float mult : multipliers()) {
    int mismatches = 0;
    for (uint32_t h = 0; h < 0x10000; ++h) {
      const uint16_t x = static_cast<uint16_t>(h);
      const uint8_t want = quantize_fp8(x, mult);
      const uint8_t got = fp8_e4m3_encode_branchless(bf16_to_float(x) * mult);
      if (got != want && mismatches++ < 3)
        ADD_FAILURE() << "bf16 0x" << std::hex << h << " multiplier bits 0x" << bits_of(mult) << ": 0x" << int{got}
                      << " != 0x" << int{want};
    }
    EXPECT_EQ(mismatches, 0) << "multiplier " << mult;
  }
}

TEST(EpHostRows, CastRowOfEveryBf16ValueEqualsSharedCast) {
  // Every bf16 value once, in order (each block spans a narrow range) and shuffled (each
  // block mixes magnitudes, NaN and infinities).
  std::vector<uint16_t> x(0x10000);
  std::iota(x.begin(), x.end(), uint16_t{0});
  std::mt19937 g(11);
  for (int pass = 0; pass < 3; ++pass) {
    if (pass > 0) std::shuffle(x.begin(), x.end(), g);
    const int hidden = static_cast<int>(x.size()), nb = hidden / kScaleBlock;
    std::vector<uint8_t> q_want(hidden);
    std::vector<float> s_want(nb);
    cast_row_fp8(x.data(), hidden, q_want.data(), s_want.data());
    for (auto cast : {&cast_row_fp8_fast, &cast_row_fp8_dispatched}) {
      std::vector<uint8_t> q_got(hidden, 0xAA);
      std::vector<float> s_got(nb, -1.0f);
      cast(x.data(), hidden, q_got.data(), s_got.data());
      EXPECT_EQ(q_got, q_want) << "pass " << pass;
      EXPECT_EQ(std::memcmp(s_got.data(), s_want.data(), s_want.size() * 4), 0) << "pass " << pass;
    }
  }
}

TEST(EpHostRows, AmaxAndCastOfRandomBlocksEqualShared) {
  std::mt19937 g(3);
  const int hidden = 7168, nb = hidden / kScaleBlock;
  std::vector<uint16_t> x(hidden);
  std::vector<uint8_t> q_want(hidden), q_got(hidden);
  std::vector<float> s_want(nb), s_got(nb);
  for (int row = 0; row < 200; ++row) {
    // Some rows of ordinary values only (amax from a normal block), some with specials.
    std::normal_distribution<float> normal(0.0f, row % 7 == 0 ? 1e-3f : 10.0f);
    for (auto& v : x) v = row % 2 == 0 ? float_to_bf16(normal(g)) : random_bf16(g);
    for (int b = 0; b < nb; ++b)
      ASSERT_EQ(bits_of(bf16_block_amax_fast(&x[b * kScaleBlock])), bits_of(bf16_block_amax(&x[b * kScaleBlock], 128)))
          << "row " << row << " block " << b;
    cast_row_fp8(x.data(), hidden, q_want.data(), s_want.data());
    for (auto cast : {&cast_row_fp8_fast, &cast_row_fp8_dispatched}) {
      cast(x.data(), hidden, q_got.data(), s_got.data());
      ASSERT_EQ(q_got, q_want) << "row " << row;
      ASSERT_EQ(std::memcmp(s_got.data(), s_want.data(), s_want.size() * 4), 0) << "row " << row;
    }
  }
}

TEST(EpHostRows, CombineRowOfRandomBlocksEqualsSharedChannelReduction) {
  std::mt19937 g(5);
  const int hidden = 2048;
  for (int trial = 0; trial < 120; ++trial) {
    const int topk = 1 + trial % 9;
    std::vector<std::vector<uint16_t>> data(static_cast<std::size_t>(topk), std::vector<uint16_t>(hidden));
    std::vector<const uint16_t*> rows(static_cast<std::size_t>(topk));
    std::vector<float> w(static_cast<std::size_t>(topk));
    std::uniform_real_distribution<float> weight(trial % 5 == 0 ? -3.0f : 0.0f, 1.0f);
    std::normal_distribution<float> normal(0.0f, trial % 3 == 0 ? 1e30f : 1.0f);  // 1e30: sums overflow
    for (int k = 0; k < topk; ++k) {
      for (auto& v : data[k]) v = trial % 2 == 0 ? float_to_bf16(normal(g)) : random_bf16(g);
      rows[k] = g() % 5 == 0 ? nullptr : data[k].data();                                      // dropped selections
      w[k] = trial % 11 == 0 ? std::bit_cast<float>(static_cast<uint32_t>(g())) : weight(g);  // any float, NaN too
    }
    for (auto combine : {&combine_row, &combine_row_dispatched}) {
      std::vector<uint16_t> got(hidden, 0xAAAA);
      combine(rows.data(), w.data(), topk, hidden, got.data());
      for (int c = 0; c < hidden; ++c)
        ASSERT_EQ(got[c], combine_channel(rows.data(), w.data(), topk, c)) << "trial " << trial << " channel " << c;
    }
  }
}

// stream_row stores exactly the bytes of memcpy, whichever path it takes (aligned rows of
// whole cache lines: non-temporal stores; any other destination or length: memcpy), and
// writes nothing outside [dst, dst + n).
TEST(EpHostRows, StreamRowStoresTheSameBytesAsMemcpy) {
  std::mt19937 g(7);
  std::vector<uint8_t> src(4096 + 64);
  for (auto& b : src) b = static_cast<uint8_t>(g());
  for (std::size_t n : {std::size_t{0}, std::size_t{64}, std::size_t{448}, std::size_t{4096}, std::size_t{100}})
    for (std::size_t dst_off : {0, 16, 8, 3})
      for (std::size_t src_off : {0, 1}) {
        std::vector<uint8_t> want(n + 128, 0x5A), got(n + 128, 0x5A);  // data() is 16-aligned
        std::memcpy(want.data() + dst_off, src.data() + src_off, n);
        stream_row(got.data() + dst_off, src.data() + src_off, n);
        store_fence();
        ASSERT_EQ(got, want) << "n " << n << " dst offset " << dst_off << " src offset " << src_off;
      }
}
