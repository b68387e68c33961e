#pragma once
// Several hyrun tasks of one job on one node (srun --ntasks-per-node=2): when Slurm gave them
// the same CPUs or GPUs, each takes its own contiguous share by its position among the
// node's tasks (PMIx local rank and local size), so that no two tasks bind ranks to the same
// cores or GPUs. What Slurm gave a task of its own is used as given.
#include <string>
#include <vector>

#include "hyrun/binding/bitmap.hpp"
#include "hyrun/binding/gpu_selection.hpp"
#include "hyrun/binding/topology.hpp"

namespace hyrun::binding {

/// This task's position among the tasks of its job on this node.
struct NodeTaskShare {
  int index = 0;  ///< PMIx local rank, 0 .. count-1
  int count = 1;  ///< PMIx local size
};

/// Share `share.index` of `usable`: whole cores (hwloc logical order, so packages stay
/// together) split into `share.count` contiguous parts whose sizes differ by at most one core.
/// With fewer cores than tasks, PUs are split; with fewer PUs, they are shared. `note` is set
/// to a sentence for the plan's notes.
Bitmap share_of_cpus(const Topology& topology, const Bitmap& usable, NodeTaskShare share, std::string& note);

/// Share `share.index` of `gpus` (in order): contiguous groups whose sizes differ by at most
/// one. With fewer GPUs than tasks every task keeps them all, and `note` says they are shared.
std::vector<GpuAssignment> share_of_gpus(const std::vector<GpuAssignment>& gpus, NodeTaskShare share,
                                         std::string& note);

}  // namespace hyrun::binding
