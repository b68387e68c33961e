#pragma once
// The process set-up of a program that starts and supervises ranks (hyrun, ep-elastic): one
// place, so that every launcher holds the same guarantees.
#include "hyrun/process/signal_events.hpp"

namespace hyrun {

/// Holds fds 0, 1 and 2 open on /dev/null where they are closed, so that no descriptor
/// opened later (a signalfd, a rank's pipe) takes their number and receives output meant
/// for them. Idempotent; call it before anything opens a file.
void hold_standard_fds();

/// Prepares this process to launch ranks: holds the standard fds, ignores SIGPIPE (a closed
/// stdout must not kill the launcher while ranks run; ranks get it back, their dispositions
/// are reset before exec), becomes child subreaper (orphans of a rank's children are
/// re-parented here and reaped), raises the open file limit to its hard limit (a few fds a
/// rank), and returns the launcher's signals as events: SIGCHLD, SIGINT, SIGTERM, SIGHUP,
/// SIGUSR1, SIGUSR2, blocked from now on. Call it once, before starting any rank.
SignalEvents prepare_launcher_process();

}  // namespace hyrun
