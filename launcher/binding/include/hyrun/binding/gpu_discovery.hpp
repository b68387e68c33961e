#pragma once
// NVIDIA GPUs of a topology, found as PCI devices (vendor 0x10de, display class 0x0300
// or 3D class 0x0302) because Debian's hwloc has no CUDA/NVML plugins; a PCI device
// carrying a cudaN/nvmlN OS device counts too, whatever its class.
#include <hwloc.h>

#include <string>
#include <vector>

#include "hyrun/binding/topology.hpp"

namespace hyrun::binding {

struct GpuDevice {
  int ordinal = 0;            ///< CUDA ordinal under CUDA_DEVICE_ORDER=PCI_BUS_ID: rank in PCI bus id order
  std::string pci_bus_id;     ///< "0000:18:00.0"
  std::string uuid;           ///< "GPU-..." when the topology carries it (NVIDIAUUID / GPUUUID info), else ""
  hwloc_obj_t pci = nullptr;  ///< the PCI device object, valid while the topology lives
};

/// All GPUs of `topology`, sorted by PCI bus id (ordinal = position).
std::vector<GpuDevice> discover_gpus(const Topology& topology);

/// "dddd:bb:dd.f" of a PCI device object.
std::string pci_bus_id(hwloc_obj_t pci);

}  // namespace hyrun::binding
