#include "hyrun/ep/report/sample_stats.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace hyrun::ep::report {

SampleStats stats_without_first(std::vector<double> samples) {
  if (samples.empty()) throw std::invalid_argument("stats_without_first: no samples");
  if (samples.size() > 1) samples.erase(samples.begin());
  const double avg = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
  std::sort(samples.begin(), samples.end());
  return {avg, samples.front(), samples.back(), samples[samples.size() / 2]};
}

}  // namespace hyrun::ep::report
