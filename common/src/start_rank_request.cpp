#include "hyrun/common/start_rank_request.hpp"

#include <fmt/format.h>

#include <charconv>

namespace hyrun {
namespace {
constexpr std::string_view kPrefix = "start-rank v1 rank=";
}  // namespace

std::string format_start_rank_request(int rank) { return fmt::format("{}{}", kPrefix, rank); }

std::optional<int> parse_start_rank_request(std::string_view message) {
  if (!message.starts_with(kPrefix)) return std::nullopt;
  message.remove_prefix(kPrefix.size());
  int rank = 0;
  const auto [end, ec] = std::from_chars(message.data(), message.data() + message.size(), rank);
  if (ec != std::errc() || end != message.data() + message.size() || rank < 1) return std::nullopt;
  return rank;
}

}  // namespace hyrun
