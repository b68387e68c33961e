#pragma once
// The elastic benchmark's runtime: every process of the job runs the plans' phases
// (phase_loop.hpp); rank 0 also coordinates them (coordinator.hpp), the other ranks follow
// it (member.hpp). The flow: docs/architecture.md, "The EP and elastic flow".
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hyrun/ep/buffer.hpp"
#include "hyrun/ep/plan/elastic_plan.hpp"
#include "hyrun/ep/report/phase_sample.hpp"
#include "hyrun/ep/report/run_report.hpp"
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
  report::RunParameters parameters;
  std::string report_dir;
  Backend backend = Backend::kHost;  ///< resolved --backend (choose_backend)
  StagedLaunch staged;
  bool kineto = false;  ///< also time dispatch and combine apart and print the split line
  /// For failure tests (a hidden option): these ranks stop themselves (SIGSTOP) at the first
  /// timed call of the first phase their process runs (phase 0, or the phase a later launch
  /// joins), so that a test holds them inside a phase, without a race, before it takes their
  /// node or launch away.
  std::vector<int> stop_in_first_phase;
};

/// Runs every plan on this process's part. Returns the process's exit code (0).
int run_elastic_bench(World& world, const BenchOptions& options);

}  // namespace hyrun::ep::elastic
