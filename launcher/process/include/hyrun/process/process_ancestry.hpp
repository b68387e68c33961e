#pragma once
// Whether a process is one of this process's ancestors: a signal from an ancestor
// (slurmstepd, mpirun's daemon) is the launch ending the step on every node, one from
// anyone else reached this node only.
#include <sys/types.h>

namespace hyrun {

/// True when `pid` is this process's parent or an ancestor of it (read from /proc).
/// False for 0 (kernel-sent) and for pids that are not ancestors or cannot be read.
bool is_ancestor(pid_t pid);

}  // namespace hyrun
