#pragma once
// What this task may use, before it is divided among its ranks: its CPUs and its GPUs, from
// what the node says (cpuset, own binding, device cgroup, Slurm's variables) and from the
// task's share of the node when several tasks of the job run there (docs/binding.md).
#include <string>
#include <vector>

#include "hyrun/binding/binding_options.hpp"
#include "hyrun/binding/binding_plan.hpp"
#include "hyrun/binding/bitmap.hpp"
#include "hyrun/binding/gpu_discovery.hpp"
#include "hyrun/binding/gpu_selection.hpp"
#include "hyrun/binding/topology.hpp"

namespace hyrun::binding {

/// `usable` (cpuset, own binding, --cpus-allowed), narrowed to this task's share of the
/// node when other tasks of the job share the node and nothing gave this one CPUs of its own:
/// its usable set is the whole allowed cpuset of the topology and there is no --cpu-map.
/// Adds a sentence to `notes` when it narrows.
Bitmap task_cpus(const Topology& topology, const BindingOptions& options, const Bitmap& usable,
                 std::vector<std::string>& notes);

/// The GPUs this task may use, in the order ranks take them, with the CUDA_VISIBLE_DEVICES
/// ids of the task's own CUDA view (renumbered under a device cgroup). Reads
/// CUDA_VISIBLE_DEVICES (else GPU_DEVICE_ORDINAL), SLURM_STEP_GPUS (else SLURM_JOB_GPUS)
/// through `env`, and the device view under options.device_roots. Narrows to this task's share
/// when other tasks of the job share the node and the task's GPUs are all the GPUs its step
/// has there (not given per task) and --gpus is not given. UsageError for bad entries.
std::vector<GpuAssignment> task_gpus(const Topology& topology, const BindingOptions& options,
                                     const std::vector<GpuDevice>& devices, const EnvironmentLookup& env,
                                     std::vector<std::string>& notes);

}  // namespace hyrun::binding
