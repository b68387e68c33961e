#include "hyrun/ep/report/summary_table.hpp"

#include "hyrun/ep/report/log_lines.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

namespace hyrun::ep::report {
namespace {

constexpr const char* kGreen = "\x1b[32m";
constexpr const char* kRed = "\x1b[31m";
constexpr const char* kReset = "\x1b[0m";
constexpr int kMarkWidth = 6;  // "active", "joined", "killed"

std::string number_or_dash(const std::optional<double>& v, int width, int precision) {
  if (!v) return fmt::format("{:>{}}", "-", width);
  return fmt::format("{:>{}.{}f}", *v, width, precision);
}

std::string gbps_or_dash(const std::optional<double>& v, int width) {
  return fmt::format("{:>{}}", v ? gbps_text(*v) : std::string("-"), width);
}

std::string mark(PhaseRole role, bool color) {
  const std::string text = fmt::format("{:<{}}", to_string(role), kMarkWidth);
  if (!color) return text;
  switch (role) {
    case PhaseRole::kActive:
    case PhaseRole::kJoined: return kGreen + text + kReset;
    case PhaseRole::kKilled: return kRed + text + kReset;
    default: return text;
  }
}

std::optional<double> max_of(const std::optional<double>& a, const std::optional<double>& b) {
  if (!a) return b;
  if (!b) return a;
  return std::max(*a, *b);
}

}  // namespace

SummaryOptions SummaryOptions::for_stream(std::FILE* out) {
  return {.color = out != nullptr && ::isatty(::fileno(out)) == 1};
}

std::optional<double> overall_mean_gbps(std::span<const PhaseSample> samples) {
  double sum = 0;
  std::size_t n = 0;
  for (const auto& s : samples) {
    if (!s.bandwidth) continue;
    sum += s.bandwidth->gbps;
    ++n;
  }
  if (n == 0) return std::nullopt;
  return sum / static_cast<double>(n);
}

std::string format_summary(std::span<const PhaseSample> samples, std::size_t num_phases,
                           const SummaryOptions& options) {
  using Row = std::pair<std::string, int>;  // (node, rank)
  std::map<Row, std::map<int, const PhaseSample*>> rows;
  for (const auto& s : samples) rows[{s.node, s.rank}][s.phase] = &s;

  std::size_t node_width = 4;
  for (const auto& [row, _] : rows) node_width = std::max(node_width, row.first.size());

  std::string out;
  out += fmt::format("{:<{}}  {:>4}", "node", node_width, "rank");
  for (std::size_t p = 0; p < num_phases; ++p) out += fmt::format("  {:<{}}", fmt::format("P{}", p), kMarkWidth);
  out +=
      fmt::format("  {:>8}  {:>8}  {:>8}  {:>8}  {:>9}\n", "GB/s avg", "GB/s min", "GB/s max", "join ms", "detect ms");

  for (const auto& [row, by_phase] : rows) {
    out += fmt::format("{:<{}}  {:>4}", row.first, node_width, row.second);
    std::vector<double> gbps;
    std::optional<double> join_ms, detect_ms;
    for (std::size_t p = 0; p < num_phases; ++p) {
      const int phase = static_cast<int>(p);
      PhaseRole role = PhaseRole::kIdle;
      if (auto it = by_phase.find(phase); it != by_phase.end()) {
        const PhaseSample& s = *it->second;
        role = s.state;
        if (s.bandwidth) gbps.push_back(s.bandwidth->gbps);
        join_ms = max_of(join_ms, s.join_ms);
        detect_ms = max_of(detect_ms, s.detect_ms);
      } else if (auto prev = by_phase.find(phase - 1); prev != by_phase.end() &&
                                                       prev->second->state != PhaseRole::kKilled &&
                                                       prev->second->state != PhaseRole::kLeft) {
        role = PhaseRole::kLeft;
      }
      out += "  " + mark(role, options.color);
    }
    std::optional<double> avg, lo, hi;
    if (!gbps.empty()) {
      avg = std::accumulate(gbps.begin(), gbps.end(), 0.0) / static_cast<double>(gbps.size());
      lo = *std::min_element(gbps.begin(), gbps.end());
      hi = *std::max_element(gbps.begin(), gbps.end());
    }
    out += fmt::format("  {}  {}  {}  {}  {}\n", gbps_or_dash(avg, 8), gbps_or_dash(lo, 8), gbps_or_dash(hi, 8),
                       number_or_dash(join_ms, 8, 1), number_or_dash(detect_ms, 9, 1));
  }

  const auto mean = overall_mean_gbps(samples);
  const auto count =
      std::count_if(samples.begin(), samples.end(), [](const PhaseSample& s) { return s.bandwidth.has_value(); });
  if (mean) {
    out += fmt::format(
        "Overall mean dispatch + combine bandwidth: {} GB/s over {} rank-phase samples (logical bandwidth: bytes counted per "
        "selection, traffic to self included)\n",
        gbps_text(*mean), count);
  } else {
    out += "Overall mean dispatch + combine bandwidth: none measured (no rank-phase sample has a bandwidth)\n";
  }
  return out;
}

}  // namespace hyrun::ep::report
