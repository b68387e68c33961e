#pragma once
// What ep-bench-host and ep-bench-gpu report of their timed calls: the statistics (first
// sample dropped, report/sample_stats.hpp), the logical bytes (layout.hpp) and the
// reference's two bandwidth lines (report/log_lines.hpp), computed one way for both.
#include <cstddef>
#include <vector>

#include "hyrun/ep/report/sample_stats.hpp"

namespace hyrun::ep::tools {

/// Seconds of every timed call, in order, the first included.
struct CallTimes {
  std::vector<double> dispatch;
  std::vector<double> combine;
  std::vector<double> total;  ///< dispatch + combine, measured as one span
  void add(double dispatch_s, double combine_s, double total_s) {
    dispatch.push_back(dispatch_s);
    combine.push_back(combine_s);
    total.push_back(total_s);
  }
};

/// The timed calls summed up: statistics without the first sample, and the logical bytes
/// of one dispatch (FP8) and one combine for `selections` valid selections.
struct CallSummary {
  std::size_t selections = 0;
  std::size_t dispatch_bytes = 0;
  std::size_t combine_bytes = 0;
  report::SampleStats total;
  report::SampleStats dispatch;
  report::SampleStats combine;
};

/// Throws std::invalid_argument when no call was timed.
CallSummary summarize(const CallTimes& times, std::size_t selections, int hidden);

/// Prints and flushes "[rank r] Dispatch + combine bandwidth: ..." and "[rank r] Dispatch
/// bandwidth: ... | Combine bandwidth: ..." (averages, as the reference).
void print_bandwidth_lines(int rank, const CallSummary& summary);

}  // namespace hyrun::ep::tools
