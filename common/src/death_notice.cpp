#include "hyrun/common/death_notice.hpp"

#include <fmt/format.h>

#include <charconv>

namespace hyrun {
namespace {
constexpr std::string_view kRankDied = "rank-died v1 ";
}  // namespace

std::string format_rank_died(int rank) { return fmt::format("{}{}", kRankDied, rank); }

std::optional<int> parse_rank_died(std::string_view message, int world_size) {
  if (!message.starts_with(kRankDied)) return std::nullopt;
  message.remove_prefix(kRankDied.size());
  int rank = -1;
  const auto [end, ec] = std::from_chars(message.data(), message.data() + message.size(), rank);
  if (ec != std::errc() || end != message.data() + message.size() || rank < 0 || rank >= world_size)
    return std::nullopt;
  return rank;
}

}  // namespace hyrun
