#include "hyrun/ep/ep_call.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hyrun/common/error.hpp"

namespace hyrun::ep {

std::string format_ranks(const std::vector<int>& ranks) { return fmt::format("{}", fmt::join(ranks, ", ")); }

void check_dispatch_call(const Shape& s, int num_tokens, const Routing& routing, int rank, int ranks,
                         const char* ranks_what) {
  if (num_tokens < 0 || num_tokens > s.max_tokens)
    throw UsageError(fmt::format("EP dispatch: num_tokens={} outside [0, max_tokens={}]", num_tokens, s.max_tokens));
  if (routing.num_ranks < 1 || routing.num_ranks > s.max_ranks || routing.num_ranks > ranks)
    throw UsageError(fmt::format("EP dispatch: routing.num_ranks={} outside [1, min(max_ranks={}, {}={})]",
                                 routing.num_ranks, s.max_ranks, ranks_what, ranks));
  if (!routing.active.empty() && static_cast<int>(routing.active.size()) != routing.num_ranks)
    throw UsageError(fmt::format("EP dispatch: routing.active has {} entries, num_ranks is {}", routing.active.size(),
                                 routing.num_ranks));
  if (!routing.is_active(rank))
    throw UsageError(fmt::format("EP dispatch: rank {} is not active in the routing", rank));
}

void check_distinct_experts(std::span<const int64_t> topk_idx, int topk) {
  const std::size_t K = static_cast<std::size_t>(topk);
  for (std::size_t i = 0; K > 0 && i < topk_idx.size() / K; ++i)
    for (std::size_t k = 0; k < K; ++k) {
      const int64_t g = topk_idx[i * K + k];
      if (g < 0) continue;
      for (std::size_t k2 = 0; k2 < k; ++k2)
        if (topk_idx[i * K + k2] == g)
          throw UsageError(
              fmt::format("EP dispatch: token {} selects expert {} twice (top-k {} and {}); a token's "
                          "experts must be distinct",
                          i, g, k2, k));
    }
}

void check_combine_call(const Shape& s, int num_tokens) {
  if (num_tokens < 0 || num_tokens > s.max_tokens)
    throw UsageError(fmt::format("EP combine: num_tokens={} outside [0, max_tokens={}]", num_tokens, s.max_tokens));
}

}  // namespace hyrun::ep
