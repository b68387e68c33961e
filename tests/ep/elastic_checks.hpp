#pragma once
// Reference checks for the elastic EP tests (in-process fabric and UCX threads): inputs
// any rank can regenerate from (seed, round, source rank), and per-rank checks of every
// dispatch output element and every combine output element. Failures throw
// std::runtime_error with the place, so that rank threads can report them.
#include <fmt/format.h>

#include <cmath>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

#include "hyrun/ep/host_backend.hpp"

namespace ep_elastic_test {

using namespace hyrun::ep;

struct Input {
  std::vector<uint16_t> x;        // [T, H]: src - 128, last 128 columns = token index
  std::vector<int64_t> topk_idx;  // [T, K] distinct experts of num_ranks*E, ~20% -1
  std::vector<float> weights;     // [T, K] in [0.05, 1)
};

inline Input make_input(const Shape& s, int num_ranks, int src, unsigned seed, int round) {
  std::mt19937 rng(seed * 1000003u + static_cast<unsigned>(round) * 7919u + static_cast<unsigned>(src));
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  const int T = s.max_tokens, H = s.hidden, K = s.topk, NE = num_ranks * s.experts_per_rank;
  Input in;
  in.x.resize(static_cast<std::size_t>(T) * H);
  for (int i = 0; i < T; ++i)
    for (int c = 0; c < H; ++c)
      in.x[static_cast<std::size_t>(i) * H + c] = float_to_bf16(c >= H - 128 ? float(i) : float(src - 128));
  in.topk_idx.resize(static_cast<std::size_t>(T) * K);
  in.weights.resize(in.topk_idx.size());
  std::vector<int64_t> perm(static_cast<std::size_t>(NE));
  for (int i = 0; i < T; ++i) {
    for (int e = 0; e < NE; ++e) perm[e] = e;
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int k = 0; k < K; ++k) {
      in.topk_idx[static_cast<std::size_t>(i) * K + k] = (k < NE && u(rng) >= 0.2f) ? perm[k] : -1;
      in.weights[static_cast<std::size_t>(i) * K + k] = 0.05f + 0.95f * u(rng);
    }
  }
  return in;
}

[[noreturn]] inline void fail(const std::string& m) { throw std::runtime_error(m); }

/// Checks rank `me`'s FP8 dispatch outputs against every active source's input and
/// returns identity expert outputs (NaN where no row was received).
inline std::vector<uint16_t> check_dispatch(const Shape& s, int me, const Routing& routing,
                                            const std::vector<Input>& in, const DispatchBuffers& o) {
  const int T = s.max_tokens, H = s.hidden, K = s.topk, E = s.experts_per_rank, R = s.max_ranks;
  std::vector<uint16_t> eo(recv_rows(s) * H, 0xFFFF);
  for (int e = 0; e < E; ++e) {
    int total = 0;
    for (int src = 0; src < R; ++src) {
      int want = 0;
      if (routing.is_active(src))
        for (int sel = 0; sel < T * K; ++sel)
          want += kept_expert(in[src].topk_idx[sel], E, routing) == int64_t{me} * E + e ? 1 : 0;
      const int n = o.layout_count[static_cast<std::size_t>(e) * R + src];
      if (n != want) fail(fmt::format("rank {} expert {}: layout_count from {} is {}, want {}", me, e, src, n, want));
      total += n;
      std::set<std::pair<int, int>> seen;
      int j = 0;
      // rows arrive in the source's (token, k) order
      for (int i = 0; i < T && j < n; ++i)
        for (int k = 0; k < K && j < n; ++k) {
          if (kept_expert(in[src].topk_idx[static_cast<std::size_t>(i) * K + k], E, routing) != int64_t{me} * E + e)
            continue;
          const std::size_t row = (static_cast<std::size_t>(e) * R + src) * T + j++;
          if (o.recv_src_token[row] != i || o.recv_src_topk[row] != k)
            fail(fmt::format("rank {} expert {} row {} from {}: (token, k) = ({}, {}), want ({}, {})", me, e, row, src,
                             o.recv_src_token[row], o.recv_src_topk[row], i, k));
          for (int c = 0; c < H; ++c) {
            const float v = dequantize_fp8(o.recv_x[row * H + c], o.recv_scales[row * (H / 128) + c / 128]);
            const float want_v = c >= H - 128 ? float(i) : float(src - 128);
            if (bf16_to_float(float_to_bf16(v)) != want_v)
              fail(fmt::format("rank {} row {} from {} channel {}: {} != {}", me, row, src, c, v, want_v));
            eo[row * H + c] = float_to_bf16(v);
          }
        }
    }
    if (o.recv_count[e] != total)
      fail(fmt::format("rank {} expert {}: recv_count {} != {}", me, e, o.recv_count[e], total));
  }
  return eo;
}

/// Checks rank `me`'s combine output y = x * (sum of kept weights): no NaN, every element
/// within 1e-2 relative, and the reference similarity below 9e-4.
inline void check_combine(const Shape& s, int me, const Routing& routing, const Input& in,
                          const std::vector<uint16_t>& y) {
  const int T = s.max_tokens, H = s.hidden, K = s.topk, E = s.experts_per_rank;
  double xy = 0, sq = 0;
  for (int i = 0; i < T; ++i) {
    double ws = 0;
    for (int k = 0; k < K; ++k)
      if (kept_expert(in.topk_idx[static_cast<std::size_t>(i) * K + k], E, routing) >= 0)
        ws += in.weights[static_cast<std::size_t>(i) * K + k];
    for (int c = 0; c < H; ++c) {
      const std::size_t p = static_cast<std::size_t>(i) * H + c;
      const double a = double(bf16_to_float(in.x[p])) * ws, b = bf16_to_float(y[p]);
      if (std::isnan(b) || std::fabs(a - b) > 1e-2 * std::max(1.0, std::fabs(a)))
        fail(fmt::format("rank {} combine token {} channel {}: {} want {}", me, i, c, b, a));
      xy += (a + 1) * (b + 1);
      sq += (a + 1) * (a + 1) + (b + 1) * (b + 1);
    }
  }
  const double diff = 1 - 2 * xy / sq;
  if (!(diff < 9e-4)) fail(fmt::format("rank {} combine diff {}", me, diff));
}

}  // namespace ep_elastic_test
