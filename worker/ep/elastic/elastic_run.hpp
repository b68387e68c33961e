#pragma once
// The elastic benchmark's runtime: every process of the job runs one ElasticRun. Rank 0 is
// also the coordinator: it drives the phases with messages (no sleeps), admits restarted
// ranks, agrees with the survivors on who failed, and gathers every rank's measurements.
//
// A phase, as the coordinator runs it:
//   1. restarted ranks of this phase rejoin the World and register their EP region;
//   2. "phase" to every rank that runs it (and to ranks that leave now: they exit cleanly);
//   3. each active rank connects to new peers and answers "ready" (join time = phase to ready);
//   4. "go"; warm-up and timed dispatch + combine iterations; the rank the plan kills
//      announces a planned exit to hyrun and SIGKILLs itself at the first timed iteration;
//   5. survivors see the failure (UCX peer errors end the waits at once), report "failed",
//      and resume with the coordinator's agreed mask and a new epoch;
//   6. "result" from every survivor; rank 0 prints the summary after the plan's last phase.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "elastic_plan.hpp"
#include "hyrun/ep/buffer.hpp"
#include "hyrun/ep/bench/phase_sample.hpp"
#include "hyrun/ep/bench/run_report.hpp"
#include "hyrun/worker.hpp"

namespace hyrun::ep::elastic {

/// How ranks come and go when ep-elastic started the job (docs/ep-bench.md, "Staged
/// launches"): a rank starts when the phase that needs it begins, started by rank 0's
/// launch on request or by a later launch that joins through rank 0's join server.
struct StagedLaunch {
  /// Ranks 0..launch_ranks-1 belong to rank 0's launch; 0: not staged (hyrun -n N starts
  /// every rank at launch and restarts the ones the plan brings back).
  int launch_ranks = 0;
  int join_port = -1;              ///< rank 0 serves joins of later launches on this TCP port; -1: none
  bool restart_returning = false;  ///< rank 0's launch also starts the new processes of its own ranks
  bool staged() const { return launch_ranks > 0; }
};

struct BenchOptions {
  std::vector<std::string> plans;  ///< --plan values, in order
  bench::RunParameters parameters;
  std::string report_dir;
  Backend backend = Backend::kHost;  ///< resolved --backend (choose_backend)
  StagedLaunch staged;
  bool kineto = false;  ///< also time dispatch and combine apart and print the split line
};

/// Runs every plan on this process's part. Returns the process's exit code (0).
int run_elastic_bench(World& world, const BenchOptions& options);

}  // namespace hyrun::ep::elastic
