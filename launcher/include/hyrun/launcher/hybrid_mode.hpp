#pragma once
// Hybrid mode: one hyrun per node (per PMIx task) under any PMIx server (Slurm's srun
// --mpi=pmix, Open MPI's mpirun). Each hyrun starts its ranks; the root address and job
// token travel through PMIx put / commit / fence / get, from hyrun's PMIx client in a helper
// process (client_process.hpp), so that hyrun serves PMIx to its own ranks.
#include <optional>

#include "hyrun/launcher/launch_options.hpp"
#include "hyrun/pmix/client_process.hpp"
#include "hyrun/process/signal_events.hpp"

namespace hyrun {

/// The PMIx connection for --mode: nullopt means local mode. Throws UsageError for
/// --mode=pmix without a server, and for a multi-task srun step without a PMIx server
/// (which would otherwise run one independent local job per task). hyrun's own PMIx_Init
/// is bounded by --bootstrap-timeout and ends with 128 + signal when one asks hyrun to end.
std::optional<pmix::ClientProcess> connect_pmix_for(const LaunchOptions& options, const SignalEvents& signals);

/// Runs this node's part of the job; returns the job's exit code. On a rank failure it
/// stops the local ranks and aborts the whole PMIx job so that other nodes stop too.
int run_hybrid(const LaunchOptions& options, SignalEvents& signals, pmix::ClientProcess& pmix);

}  // namespace hyrun
