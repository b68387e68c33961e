#include "hyrun/ep/reference_inputs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <sstream>

#include "hyrun/common/error.hpp"
#include "hyrun/ep/per_token.hpp"

namespace hyrun::ep::check {

std::string CaseShape::describe() const { return fmt::format("T={} H={} K={}", tokens, hidden, topk); }

std::vector<CaseShape> parse_shapes(const std::string& list) {
  std::vector<CaseShape> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    CaseShape c;
    char c1 = 0, c2 = 0;
    std::istringstream is(item);
    if (!(is >> c.tokens >> c1 >> c.hidden >> c2 >> c.topk) || c1 != ':' || c2 != ':' || !(is >> std::ws).eof())
      throw UsageError(fmt::format("--shapes: '{}' is not TOKENS:HIDDEN:TOPK (e.g. 128:7168:8)", item));
    if (c.tokens < 1 || c.hidden < kScaleBlock || c.hidden % kScaleBlock != 0 || c.topk < 1)
      throw UsageError(
          fmt::format("--shapes: '{}': need tokens >= 1, hidden a positive multiple of 128, topk >= 1", item));
    out.push_back(c);
  }
  if (out.empty()) throw UsageError("--shapes: the list is empty");
  return out;
}

std::vector<CaseShape> default_shapes() {
  return {{1, 2048, 1}, {7, 2560, 3}, {32, 4096, 8}, {64, 7168, 8}, {128, 7168, 8}, {200, 5120, 4}, {256, 8192, 6}};
}

RankInputs make_rank_inputs(const CaseShape& c, int num_ranks, int experts_per_rank, int rank, uint64_t seed,
                            int case_index) {
  // One generator per (seed, case, rank): reproducible on every rank, independent streams.
  std::seed_seq sseq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(case_index),
                     static_cast<uint32_t>(rank)};
  std::mt19937_64 rng(sseq);
  const int T = c.tokens, H = c.hidden, K = c.topk, NE = num_ranks * experts_per_rank;
  RankInputs in;
  in.x.resize(static_cast<std::size_t>(T) * H);
  const uint16_t value = float_to_bf16(row_value(rank));
  for (int i = 0; i < T; ++i) {
    uint16_t* row = in.x.data() + static_cast<std::size_t>(i) * H;
    std::fill(row, row + H - kScaleBlock, value);
    std::fill(row + H - kScaleBlock, row + H, float_to_bf16(static_cast<float>(i)));
  }
  in.topk_idx.assign(static_cast<std::size_t>(T) * K, -1);
  in.topk_weights.resize(in.topk_idx.size());
  std::vector<int64_t> experts(static_cast<std::size_t>(NE));
  std::iota(experts.begin(), experts.end(), 0);
  // Raw engine bits (not std distributions) so the values do not depend on the library.
  auto uniform = [&rng] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  for (int i = 0; i < T; ++i) {
    for (int k = 0; k < K && k < NE; ++k) {  // partial Fisher-Yates: K distinct experts
      const int j = k + static_cast<int>(uniform() * (NE - k));
      std::swap(experts[k], experts[j]);
    }
    for (int k = 0; k < K; ++k) {
      const std::size_t sel = static_cast<std::size_t>(i) * K + k;
      in.topk_idx[sel] = (k < NE && uniform() >= 0.125) ? experts[k] : -1;
      in.topk_weights[sel] = static_cast<float>(0.05 + 0.95 * uniform());
    }
  }
  return in;
}

}  // namespace hyrun::ep::check
