#pragma once
// What the elastic runtime measured for one rank in one phase: the input of the summary table,
// results.json and the plot. Plain data, filled by the runtime (rank 0 gathers every rank's samples).
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hyrun/ep/plan/elastic_plan.hpp"
#include "hyrun/ep/report/log_lines.hpp"

namespace hyrun::ep::report {

struct PhaseSample {
  int phase = 0;                            ///< 0-based plan phase
  int rank = 0;                             ///< global (plan) rank
  std::string node;                         ///< host name the rank's process ran on
  int local_rank = 0;                       ///< rank on that node
  PhaseRole state = PhaseRole::kActive;     ///< what the rank did in this phase
  std::optional<BandwidthStats> bandwidth;  ///< dispatch + combine; absent when killed before measuring
  std::optional<SplitBandwidth> split;      ///< dispatch and combine timed separately, when measured
  std::optional<double> join_ms;            ///< when it joined: start of phase to connections ready
  std::optional<double> detect_ms;          ///< when ranks failed: failure to detection by this rank
  std::vector<int> detected_ranks;          ///< the failed ranks this rank detected in this phase
};

/// CloudAI's default metric: the mean of every "Dispatch + combine bandwidth" value (GB/s, logical);
/// empty when no sample has a bandwidth.
std::optional<double> overall_mean_gbps(std::span<const PhaseSample> samples);

}  // namespace hyrun::ep::report
