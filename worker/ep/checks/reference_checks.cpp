#include "hyrun/ep/reference_checks.hpp"

#include <fmt/format.h>

#include <cmath>

namespace hyrun::ep::check {

namespace {
constexpr std::size_t kMaxProblems = 5;

uint16_t received_bf16(const DispatchBuffers& out, Format f, int hidden, std::size_t row, int ch) {
  const std::size_t at = row * hidden + ch;
  if (f == Format::kBF16) return reinterpret_cast<const uint16_t*>(out.recv_x.data())[at];
  const float scale = out.recv_scales[row * (hidden / kScaleBlock) + ch / kScaleBlock];
  return float_to_bf16(dequantize_fp8(out.recv_x[at], scale));
}
}  // namespace

double combine_threshold(Format f) { return f == Format::kFP8 ? 9e-4 : 1e-5; }

void CheckReport::fail(std::string what) {
  ok = false;
  if (problems.size() < kMaxProblems) problems.push_back(std::move(what));
}

void check_dispatch(const Shape& s, Format f, int me, const Routing& routing, const std::vector<RankInputs>& all,
                    const DispatchBuffers& out, CheckReport& rep) {
  const int R = s.max_ranks, T = s.max_tokens, H = s.hidden, K = s.topk, E = s.experts_per_rank;
  for (int e = 0; e < E; ++e) {
    const int64_t g = static_cast<int64_t>(me) * E + e;
    int expected_total = 0;
    for (int src = 0; src < R; ++src) {
      // The selections of expert g by src, in (token, k) order: the rows src must have sent.
      std::vector<std::pair<int, int>> sel;
      if (src < routing.num_ranks && routing.is_active(src))
        for (int i = 0; i < T; ++i)
          for (int k = 0; k < K; ++k)
            if (kept_expert(all[src].topk_idx[static_cast<std::size_t>(i) * K + k], E, routing) == g)
              sel.emplace_back(i, k);
      expected_total += static_cast<int>(sel.size());
      const int n = out.layout_count[static_cast<std::size_t>(e) * R + src];
      if (n != static_cast<int>(sel.size())) {
        rep.fail(fmt::format("layout_count[expert {}][src {}] = {}, expected {}", e, src, n, sel.size()));
        continue;
      }
      const uint16_t value = float_to_bf16(row_value(src));
      for (int j = 0; j < n; ++j) {
        const std::size_t row = (static_cast<std::size_t>(e) * R + src) * T + j;
        ++rep.rows_checked;
        if (out.recv_src_token[row] != sel[j].first || out.recv_src_topk[row] != sel[j].second)
          rep.fail(fmt::format("expert {} row {} from rank {}: source (token {}, topk {}), expected ({}, {})", e, j,
                               src, out.recv_src_token[row], out.recv_src_topk[row], sel[j].first, sel[j].second));
        const uint16_t index = float_to_bf16(static_cast<float>(sel[j].first));
        int bad = 0, first_bad = -1;
        for (int ch = 0; ch < H; ++ch) {
          const uint16_t v = received_bf16(out, f, H, row, ch);
          const uint16_t want = ch < H - kScaleBlock ? value : index;
          if (v != want || std::isnan(bf16_to_float(v))) {
            if (bad++ == 0) first_bad = ch;
          }
        }
        if (bad)
          rep.fail(fmt::format("expert {} row {} from rank {}: {} channel(s) wrong, first channel {} = {}, expected {}",
                               e, j, src, bad, first_bad, bf16_to_float(received_bf16(out, f, H, row, first_bad)),
                               first_bad < H - kScaleBlock ? row_value(src) : static_cast<float>(sel[j].first)));
      }
    }
    if (out.recv_count[e] != expected_total)
      rep.fail(fmt::format("recv_count[expert {}] = {}, expected {} (selections across ranks)", e, out.recv_count[e],
                           expected_total));
  }
}

std::vector<uint16_t> identity_expert_out(const Shape& s, Format f, const DispatchBuffers& out) {
  const int R = s.max_ranks, T = s.max_tokens, H = s.hidden, E = s.experts_per_rank;
  std::vector<uint16_t> eo(recv_rows(s) * H, 0);
  for (int e = 0; e < E; ++e)
    for (int src = 0; src < R; ++src) {
      const int n = out.layout_count[static_cast<std::size_t>(e) * R + src];
      for (int j = 0; j < n && j < T; ++j) {
        const std::size_t row = (static_cast<std::size_t>(e) * R + src) * T + j;
        for (int ch = 0; ch < H; ++ch) eo[row * H + ch] = received_bf16(out, f, H, row, ch);
      }
    }
  return eo;
}

void check_combine(const Shape& s, Format f, const Routing& routing, const RankInputs& mine,
                   const std::vector<uint16_t>& y, CheckReport& rep) {
  const int T = s.max_tokens, H = s.hidden, K = s.topk, E = s.experts_per_rank;
  double xy = 0.0, sq = 0.0;
  std::size_t nan = 0, bad = 0;
  std::string first_bad;
  for (int i = 0; i < T; ++i) {
    double wsum = 0.0;
    for (int k = 0; k < K; ++k) {
      const std::size_t sel = static_cast<std::size_t>(i) * K + k;
      if (kept_expert(mine.topk_idx[sel], E, routing) >= 0) wsum += mine.topk_weights[sel];
    }
    for (int ch = 0; ch < H; ++ch) {
      const std::size_t at = static_cast<std::size_t>(i) * H + ch;
      const double want = static_cast<double>(bf16_to_float(mine.x[at])) * wsum;
      const double got = bf16_to_float(y[at]);
      if (std::isnan(got)) {
        ++nan;
        continue;
      }
      const double a = want + 1.0, b = got + 1.0;
      xy += a * b;
      sq += a * a + b * b;
      const double rel = std::abs(got - want) / std::max(std::abs(want), 1.0);
      rep.max_elem_rel = std::max(rep.max_elem_rel, rel);
      if (rel > 1e-2 && bad++ == 0) first_bad = fmt::format("token {} channel {} = {}, expected {}", i, ch, got, want);
    }
  }
  rep.combine_diff = sq > 0.0 ? 1.0 - 2.0 * xy / sq : 0.0;
  if (nan) rep.fail(fmt::format("combine: {} NaN element(s)", nan));
  if (!(rep.combine_diff < combine_threshold(f)))
    rep.fail(fmt::format("combine: diff {:.3g} not below {:.0e}", rep.combine_diff, combine_threshold(f)));
  if (bad) rep.fail(fmt::format("combine: {} element(s) off by more than 1e-2 relative, first {}", bad, first_bad));
}

}  // namespace hyrun::ep::check
