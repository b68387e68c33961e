#pragma once
// The inputs of the DeepEP / NIXL low-latency reference test, generated identically on
// every rank from (seed, case, rank) so that any rank can recompute any other rank's
// routing (the expected counts and source indexes need no communication):
//  * x [T, H] bf16: every channel holds rank - 128, except the last 128 channels, which
//    hold the token index;
//  * topk_idx [T, K]: K distinct random experts out of num_ranks * E, each replaced by -1
//    with probability 1/8 (and -1 wherever K exceeds the number of experts);
//  * topk_weights [T, K]: uniform in [0.05, 1).
#include <cstdint>
#include <string>
#include <vector>

namespace hyrun::ep::check {

/// One test shape: tokens per rank, hidden size, top-k.
struct CaseShape {
  int tokens = 128;
  int hidden = 7168;
  int topk = 8;
  std::string describe() const;  ///< "T=128 H=7168 K=8"
};

/// "T:H:K,T:H:K,..." (e.g. "1:2048:1,128:7168:8"); throws UsageError naming the bad item.
std::vector<CaseShape> parse_shapes(const std::string& list);
/// The built-in sweep: hidden 2048..8192, tokens 1..256, top-k 1..8.
std::vector<CaseShape> default_shapes();

struct RankInputs {
  std::vector<uint16_t> x;          ///< [T, H] bf16
  std::vector<int64_t> topk_idx;    ///< [T, K]
  std::vector<float> topk_weights;  ///< [T, K]
};

/// Inputs of `rank` for case number `case_index` (the same on every rank that asks).
RankInputs make_rank_inputs(const CaseShape& c, int num_ranks, int experts_per_rank, int rank, uint64_t seed,
                            int case_index);

/// The value every non-index channel of rank `rank`'s rows holds.
inline float row_value(int rank) { return static_cast<float>(rank - 128); }

}  // namespace hyrun::ep::check
