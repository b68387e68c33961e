#include "bench_results.hpp"

#include <cstdio>

#include "hyrun/ep/layout.hpp"
#include "hyrun/ep/report/log_lines.hpp"

namespace hyrun::ep::tools {

CallSummary summarize(const CallTimes& times, std::size_t selections, int hidden) {
  CallSummary s;
  s.selections = selections;
  s.dispatch_bytes = dispatch_bytes(selections, hidden, Format::kFP8);
  s.combine_bytes = combine_bytes(selections, hidden);
  s.total = report::stats_without_first(times.total);
  s.dispatch = report::stats_without_first(times.dispatch);
  s.combine = report::stats_without_first(times.combine);
  return s;
}

void print_bandwidth_lines(int rank, const CallSummary& s) {
  const report::BandwidthStats both{bandwidth_gbps(s.dispatch_bytes, s.combine_bytes, s.total.avg), s.total.avg * 1e6,
                                    s.total.min * 1e6, s.total.max * 1e6};
  const report::SplitBandwidth split{s.dispatch_bytes / 1e9 / s.dispatch.avg, s.dispatch.avg * 1e6,
                                     s.combine_bytes / 1e9 / s.combine.avg, s.combine.avg * 1e6};
  std::printf("%s\n%s\n", report::bandwidth_line(rank, both).c_str(),
              report::split_bandwidth_line(rank, split).c_str());
  std::fflush(stdout);
}

}  // namespace hyrun::ep::tools
