#pragma once
// The launch sequence, the same in every launch mode (docs/architecture.md): the binding
// plan, the exchange of records among the job's hyrun processes (root_exchange.hpp), the
// ranks' start, the supervision, and how a failure ends the job on every node.
#include "hyrun/launcher/launch_options.hpp"
#include "hyrun/launcher/root_exchange.hpp"
#include "hyrun/process/signal_events.hpp"

namespace hyrun {

/// Runs this hyrun's part of the job and returns the job's exit code. Throws Error for a
/// launch that could not complete and that every node learned of by itself (a node's
/// error record, a different -n), after every started rank has been stopped and reaped.
/// Any other failure, when the exchange has peers, is said here and ends the job on every
/// node through RootExchange::abort(): a fence or get that timed out, a rank that could
/// not start, a lost node, a rank's failure, a signal not from the launch above us.
int run_launch(const LaunchOptions& options, SignalEvents& signals, RootExchange& exchange);

}  // namespace hyrun
