#pragma once
// Which of the node's GPUs this task may use: its CUDA_VISIBLE_DEVICES, narrowed by
// --gpus, else all of them. Entries are CUDA ordinals under CUDA_DEVICE_ORDER=PCI_BUS_ID
// or "GPU-" UUIDs (matched when the topology carries UUIDs). MIG instances are refused.
#include <optional>
#include <string>
#include <vector>

#include "hyrun/binding/gpu_discovery.hpp"

namespace hyrun::binding {

/// One GPU given to a rank.
struct GpuAssignment {
  int index = 0;           ///< physical CUDA ordinal (PCI bus id order)
  std::string pci_bus_id;  ///< "0000:18:00.0"
  std::string uuid;        ///< "" when unknown
  std::string
      visible_id;  ///< the id as given to the parent (index or UUID): what the rank's CUDA_VISIBLE_DEVICES holds
};

/// The allowed GPUs in the order given (or PCI order when all). `cuda_visible_devices` is the
/// task's variable (nullopt when unset; "" means no GPU), `gpus_option` the --gpus list ("" when
/// not given). Throws UsageError naming the entry and the source for an unknown index or UUID,
/// a MIG id, a duplicate, UUIDs on a topology without UUIDs, or a --gpus entry outside
/// CUDA_VISIBLE_DEVICES.
///
/// `cuda_view` holds the ordinals CUDA in this task numbers 0, 1, ... (cuda_view_ordinals():
/// under a device cgroup only the task's GPUs); nullptr means every GPU of the node. Indexes
/// of CUDA_VISIBLE_DEVICES and --gpus count within it, and so does the visible_id given to
/// a rank (whose CUDA sees the same view).
std::vector<GpuAssignment> select_gpus(const std::vector<GpuDevice>& gpus,
                                       const std::optional<std::string>& cuda_visible_devices,
                                       const std::string& gpus_option, const std::vector<int>* cuda_view = nullptr,
                                       const std::string& visible_source = "CUDA_VISIBLE_DEVICES");

}  // namespace hyrun::binding
