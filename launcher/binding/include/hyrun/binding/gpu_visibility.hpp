#pragma once
// Which GPUs of the node this task can use, as the node itself says, and how CUDA in the
// task numbers them. Under Slurm's ConstrainDevices=yes the task's device cgroup lets it open
// only its own /dev/nvidiaN, CUDA enumerates only those (from 0), and Slurm's
// CUDA_VISIBLE_DEVICES counts within them, while hwloc (sysfs) still shows every GPU of the
// node. The NVIDIA driver's /proc/driver/nvidia/gpus/<bus id>/information maps each device
// minor N (/dev/nvidiaN) to its PCI bus id, which names the GPU in hwloc.
#include <string>
#include <vector>

#include "hyrun/binding/gpu_discovery.hpp"

namespace hyrun::binding {

/// Where to read the node's device state; tests point these at fixture directories.
struct SystemRoots {
  std::string dev = "/dev";    ///< holds nvidiaN device nodes
  std::string proc = "/proc";  ///< holds driver/nvidia/gpus/*/information
};

/// One GPU the NVIDIA driver reports.
struct DriverGpu {
  int minor = 0;           ///< N of /dev/nvidiaN (Slurm's gres index with File=/dev/nvidia[..])
  std::string pci_bus_id;  ///< "0000:18:00.0", lower case
  bool openable = false;   ///< /dev/nvidiaN opens read-write here (the device cgroup allows it)
};

/// What the node says about this task's GPUs.
struct TaskGpuView {
  std::vector<DriverGpu>
      driver_gpus;  ///< every GPU the driver reports, by minor; empty without the driver's /proc files
  /// Some GPU the driver reports cannot be opened: a device cgroup hides it, and CUDA in this
  /// task numbers only the openable ones, from 0, in PCI bus id order.
  bool constrained = false;
  /// The GPUs CUDA in this task can see, in its numbering (PCI bus id order) when constrained.
  std::vector<std::string> visible_bus_ids;
  /// One line for logs and notes: "device cgroup: /dev/nvidia{2,3} of 0-3 can be opened".
  std::string evidence;
};

/// Reads the driver's GPU list under roots.proc and tries to open each /dev/nvidiaN under
/// roots.dev (O_RDWR, as CUDA does; closed at once). Never throws for missing files: no
/// driver information means an unconstrained view (constrained = false).
TaskGpuView read_task_gpu_view(const SystemRoots& roots);

/// The ordinals (positions in `gpus`, hwloc's PCI order) of the GPUs CUDA in this task
/// numbers 0, 1, ...: the visible bus ids when constrained, else every GPU of the node.
/// Throws hyrun::Error naming the bus id when a GPU the driver reports is not in the topology.
std::vector<int> cuda_view_ordinals(const TaskGpuView& view, const std::vector<GpuDevice>& gpus);

/// The ordinals named by a Slurm GPU list such as SLURM_STEP_GPUS ("0,1" or "0-3": device
/// minors): mapped through the driver's minor -> bus id table; empty when a minor is unknown
/// or the driver's table is absent. `list` malformed: UsageError naming `source`.
std::vector<int> ordinals_of_minors(const std::string& list, const std::string& source, const TaskGpuView& view,
                                    const std::vector<GpuDevice>& gpus);

}  // namespace hyrun::binding
