#pragma once
// One launch of a staged elastic job (ep-elastic): the first launch (no --tcp-server) runs
// rank 0 and its join server; each later one asks rank 0's join server for its ranks. Both
// start their ranks through hyrun's launcher (binding, output, supervision) running
// ep-bench, and return the launch's exit code.
#include <string>
#include <vector>

#include "hyrun/launcher/cli_options.hpp"
#include "hyrun/process/signal_events.hpp"

namespace hyrun::ep::elastic {

struct StagedLaunchOptions {
  LaunchOptions launch;          ///< command = ep-bench and its options; ranks is set here
  int num_processes = 8;         ///< --num-processes
  int world_size = 0;            ///< the plan's max rank + 1
  std::vector<int> first_phase;  ///< the first phase's active ranks
  std::string tcp_server;        ///< empty: this is the first launch
  int port = 9999;
  std::string token;       ///< the job token (the first launch makes it)
  std::string token_file;  ///< "" when the token comes from the environment
  int timeout_ms = 30000;  ///< --timeout-ms: the join's own deadline
  bool restart_returning = false;
};

/// The first launch: writes the token file (if any), starts the ranks 0..num_processes-1
/// that the first phase uses, and the others when rank 0 asks for them.
int run_first_launch(StagedLaunchOptions options, SignalEvents& signals);
/// A later launch: joins through --tcp-server and runs the ranks it was given.
int run_joining_launch(StagedLaunchOptions options, SignalEvents& signals);

}  // namespace hyrun::ep::elastic
