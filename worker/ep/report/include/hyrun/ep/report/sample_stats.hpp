#pragma once
// The benches' timing summary: the first timed sample carries first-touch and connection
// costs, so it is dropped (as the DeepEP reference does) before the average, median and extremes.
#include <vector>

namespace hyrun::ep::report {

struct SampleStats {
  double avg = 0;
  double min = 0;
  double max = 0;
  double median = 0;  ///< the upper of the two middle samples for an even count
};

/// avg/min/max/median of `samples` without the first one; a single sample is kept. Throws
/// std::invalid_argument for an empty list (no time was measured).
SampleStats stats_without_first(std::vector<double> samples);

}  // namespace hyrun::ep::report
