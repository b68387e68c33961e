#include "hyrun/ep/report/log_lines.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "hyrun/common/error.hpp"

namespace hyrun::ep::report {
namespace {

std::string prefix(int global_rank, int local_rank) {
  return fmt::format("global_rank={}, local_rank={} ->", global_rank, local_rank);
}

struct Field {
  const char* name;
  double value;
};

void require_finite(int rank, std::initializer_list<Field> fields) {
  for (const Field& f : fields) {
    if (!std::isfinite(f.value)) {
      throw Error(fmt::format(
          "bandwidth line for rank {}: {} is {}; a log line must carry finite numbers (CloudAI cannot parse it)", rank,
          f.name, f.value));
    }
  }
}

}  // namespace

std::string phase_start_line(int global_rank, int local_rank, int phase) {
  return fmt::format("{} start phase {}", prefix(global_rank, local_rank), phase);
}

std::string phase_end_line(int global_rank, int local_rank, int phase) {
  return fmt::format("{} end phase {}", prefix(global_rank, local_rank), phase);
}

std::string connections_added_line(int global_rank, int local_rank, std::span<const int> ranks) {
  return fmt::format("{} adding connections to ranks [{}]", prefix(global_rank, local_rank), fmt::join(ranks, ", "));
}

std::string connections_removed_line(int global_rank, int local_rank, std::span<const int> ranks) {
  return fmt::format("{} removing connections to ranks [{}]", prefix(global_rank, local_rank), fmt::join(ranks, ", "));
}

std::string failed_ranks_detected_line(int global_rank, int local_rank, std::span<const int> ranks, double detect_ms) {
  require_finite(global_rank, {{"detect_ms", detect_ms}});
  return fmt::format("{} detected failed ranks [{}] in {:.1f} ms", prefix(global_rank, local_rank),
                     fmt::join(ranks, ", "), detect_ms);
}

std::string unused_rank_line(int global_rank, int local_rank) {
  return fmt::format("{} no phase of the plan uses this rank; exiting with status 0", prefix(global_rank, local_rank));
}

std::string gbps_text(double gbps) {
  int decimals = 2;
  if (gbps > 0 && gbps < 1) decimals = std::min(17, 2 - static_cast<int>(std::floor(std::log10(gbps))));
  return fmt::format("{:.{}f}", gbps, decimals);
}

std::string bandwidth_line(int rank, const BandwidthStats& s) {
  require_finite(rank, {{"gbps", s.gbps}, {"avg_us", s.avg_us}, {"min_us", s.min_us}, {"max_us", s.max_us}});
  return fmt::format(
      "[rank {}] Dispatch + combine bandwidth: {} GB/s, avg_t={:.2f} us, min_t={:.2f} us, max_t={:.2f} us", rank,
      gbps_text(s.gbps), s.avg_us, s.min_us, s.max_us);
}

std::string split_bandwidth_line(int rank, const SplitBandwidth& s) {
  require_finite(rank, {{"dispatch_gbps", s.dispatch_gbps},
                        {"dispatch_avg_us", s.dispatch_avg_us},
                        {"combine_gbps", s.combine_gbps},
                        {"combine_avg_us", s.combine_avg_us}});
  return fmt::format(
      "[rank {}] Dispatch bandwidth: {} GB/s, avg_t={:.2f} us | Combine bandwidth: {} GB/s, avg_t={:.2f} us", rank,
      gbps_text(s.dispatch_gbps), s.dispatch_avg_us, gbps_text(s.combine_gbps), s.combine_avg_us);
}

}  // namespace hyrun::ep::report
