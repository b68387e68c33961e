#pragma once
#include "hyrun/launcher/launch_options.hpp"
#include "hyrun/process/signal_events.hpp"

namespace hyrun {

/// Local mode (no PMIx server): this hyrun is the only parent and starts every rank of
/// the job on this machine. Returns the job's exit code; throws Error for a launch that
/// could not complete, after every started rank has been stopped and reaped.
int run_local(const LaunchOptions& options, SignalEvents& signals);

}  // namespace hyrun
