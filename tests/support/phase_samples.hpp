#pragma once
// For the report tests: one sample of a hand-made run on two nodes (ranks 0 and 1 on node-a,
// the others on node-b, two local ranks a node), as ep-bench would record it.
#include <optional>

#include "hyrun/ep/report/phase_sample.hpp"

namespace hyrun::test_support {

/// A sample of `rank` in `phase`. With `gbps`: a bandwidth line of `gbps` and the times of
/// `times_us` (its gbps is replaced); with `detect_ms`: rank 2 detected as failed.
inline ep::report::PhaseSample hand_made_sample(int phase, int rank, PhaseRole state, std::optional<double> gbps,
                                                std::optional<double> join_ms, std::optional<double> detect_ms,
                                                ep::report::BandwidthStats times_us) {
  ep::report::PhaseSample s;
  s.phase = phase;
  s.rank = rank;
  s.node = rank < 2 ? "node-a" : "node-b";
  s.local_rank = rank % 2;
  s.state = state;
  if (gbps) {
    s.bandwidth = times_us;
    s.bandwidth->gbps = *gbps;
  }
  s.join_ms = join_ms;
  s.detect_ms = detect_ms;
  if (detect_ms) s.detected_ranks = {2};
  return s;
}

}  // namespace hyrun::test_support
