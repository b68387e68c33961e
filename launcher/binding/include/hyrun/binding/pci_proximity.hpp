#pragma once
// How close two I/O objects are in the PCI tree, nearest first. Used to pair a GPU
// with its NIC: GPUDirect RDMA is fastest through a shared PCIe switch.
#include <hwloc.h>

#include <string>

namespace hyrun::binding {

enum class PciProximity {
  kSamePcieSwitch = 0,  ///< common ancestor is a PCI-to-PCI bridge (a switch)
  kSameHostBridge = 1,  ///< common ancestor is a host bridge (root complex)
  kSameNumaNode = 2,    ///< common ancestor is a CPU-side object with one NUMA node
  kSamePackage = 3,     ///< common ancestor is (inside) one package
  kSameMachine = 4,     ///< only the machine is common
};

PciProximity pci_proximity(hwloc_obj_t a, hwloc_obj_t b);

/// "same PCIe switch", "same host bridge", ...
std::string describe(PciProximity proximity);

}  // namespace hyrun::binding
