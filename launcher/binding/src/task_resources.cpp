#include "hyrun/binding/task_resources.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "hyrun/binding/cpu_list.hpp"
#include "hyrun/binding/gpu_visibility.hpp"
#include "hyrun/binding/node_share.hpp"
#include "hyrun/common/error.hpp"

namespace hyrun::binding {
namespace {

std::vector<int> ordinals_of(const std::vector<GpuAssignment>& gpus) {
  std::vector<int> out;
  for (const auto& g : gpus) out.push_back(g.index);
  std::sort(out.begin(), out.end());
  return out;
}

// The step's GPUs on this node as ordinals: Slurm's list holds gres indexes, which are the
// device minors with File=/dev/nvidia[..]; without the driver's table, node-wide indexes.
// Empty when Slurm gives no list or an entry cannot be placed.
std::vector<int> step_gpus(const std::string& list, const std::string& name, const TaskGpuView& view,
                           const std::vector<GpuDevice>& devices) {
  std::vector<int> indexes;
  try {
    indexes = parse_cpu_list(list, name);
  } catch (const Error& e) {
    spdlog::warn("binding: {}; not used", e.what());
    return {};
  }
  if (!view.driver_gpus.empty()) return ordinals_of_minors(list, name, view, devices);
  for (int i : indexes)
    if (i >= static_cast<int>(devices.size())) return {};
  return indexes;
}

}  // namespace

Bitmap task_cpus(const Topology& topology, const BindingOptions& options, const Bitmap& usable,
                 std::vector<std::string>& notes) {
  if (options.node_share.count <= 1 || !options.cpu_map.empty()) return Bitmap::copy_of(usable.get());
  // Slurm's own per-task binding (task/affinity) or a --cpus-allowed narrows usable below
  // the step's cpuset: then these CPUs are this task's own.
  if (!hwloc_bitmap_isequal(usable.get(), hwloc_topology_get_allowed_cpuset(topology.get())))
    return Bitmap::copy_of(usable.get());
  std::string note;
  Bitmap mine = share_of_cpus(topology, usable, options.node_share, note);
  notes.push_back(note);
  return mine;
}

std::vector<GpuAssignment> task_gpus(const Topology& topology, const BindingOptions& options,
                                     const std::vector<GpuDevice>& devices, const EnvironmentLookup& env,
                                     std::vector<std::string>& notes) {
  // Another machine's topology (--topology) has no device state here unless a test gives one.
  const TaskGpuView view = options.device_roots        ? read_task_gpu_view(*options.device_roots)
                           : topology.is_this_system() ? read_task_gpu_view(SystemRoots{})
                                                       : TaskGpuView{};
  const std::vector<int> cuda_view = cuda_view_ordinals(view, devices);
  if (view.constrained) {
    spdlog::debug("binding: {}", view.evidence);
    notes.push_back(view.evidence + "; CUDA in the task numbers those from 0");
  }

  std::string visible_name = "CUDA_VISIBLE_DEVICES";
  auto visible = env(visible_name);
  if (!visible) {
    if (auto ordinal = env("GPU_DEVICE_ORDINAL")) {  // Slurm sets both; some setups only this one
      visible_name = "GPU_DEVICE_ORDINAL";
      visible = ordinal;
    }
  }
  std::vector<GpuAssignment> gpus =
      select_gpus(devices, visible, options.gpus, view.constrained ? &cuda_view : nullptr, visible_name);

  std::string step_name = "SLURM_STEP_GPUS";
  auto step_list = env(step_name);
  if (!step_list) step_list = env(step_name = "SLURM_JOB_GPUS");
  const std::vector<int> step = step_list ? step_gpus(*step_list, step_name, view, devices) : std::vector<int>{};
  if (view.constrained && !step.empty() && step != cuda_view)
    spdlog::warn("binding: {} '{}' names other GPUs than the task can open ({}); using the ones it can open", step_name,
                 *step_list, view.evidence);
  if (!view.constrained && view.driver_gpus.empty() && visible && step_list && options.gpus.empty() &&
      *visible != *step_list)
    spdlog::warn(
        "binding: {} '{}' differs from {} '{}' and the NVIDIA driver's /proc files are not readable here, so "
        "hyrun cannot tell whether Slurm numbered the task's GPUs from 0 (ConstrainDevices); it reads them as "
        "node-wide PCI-order indexes; pass --gpus with node-wide indexes to be sure",
        visible_name, *visible, step_name, *step_list);

  if (options.node_share.count > 1 && options.gpus.empty() && !gpus.empty()) {
    // All the GPUs the step has here (or, without Slurm's list, all the task can see) are
    // shared with the node's other tasks; fewer are this task's own.
    const std::vector<int> whole = step.empty() ? cuda_view : step;
    if (ordinals_of(gpus) == whole) {
      std::string note;
      gpus = share_of_gpus(gpus, options.node_share, note);
      notes.push_back(note);
    }
  }
  return gpus;
}

}  // namespace hyrun::binding
