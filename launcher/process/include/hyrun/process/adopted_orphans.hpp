#pragma once
// The launcher's leftovers: as child subreaper (prepare_launcher_process), it becomes the
// parent of every descendant of a rank whose own parent ended, also of one that left its
// rank's process group (setsid, a daemon).

#include <sys/types.h>

namespace hyrun {

/// Kills and reaps every child of this process but its own helpers (spare_helper). Call it
/// only once every rank process has ended: each other child is then such a leftover, and
/// killing it is safe (an unreaped child's pid cannot belong to anyone else). Bounded: a
/// process in uninterruptible sleep dies only when it wakes, and is reaped later by the
/// caller's usual reaping.
void kill_adopted_orphans();

/// A child of hyrun's own (its PMIx client helper) that the sweep leaves alone: it ends
/// after the ranks, when its owner says so.
void spare_helper(pid_t pid);

}  // namespace hyrun
