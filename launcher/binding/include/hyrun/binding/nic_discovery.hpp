#pragma once
// RDMA NICs of a topology: OpenFabrics OS devices (mlx5_N) under their PCI device.
#include <hwloc.h>

#include <string>
#include <vector>

#include "hyrun/binding/topology.hpp"

namespace hyrun::binding {

struct NicDevice {
  std::string name;           ///< "mlx5_3"
  int port = 1;               ///< first ACTIVE port; 1 when the topology has no port state
  bool active = true;         ///< false when port states are known and none is ACTIVE
  std::string pci_bus_id;     ///< of its PCI device, "" when it hangs elsewhere
  hwloc_obj_t pci = nullptr;  ///< its PCI device (or the OS device itself when it has no PCI parent)

  /// "mlx5_3:1", the UCX_NET_DEVICES form.
  std::string ucx_name() const { return name + ":" + std::to_string(port); }
};

/// All OpenFabrics devices, sorted by PCI bus id then name.
std::vector<NicDevice> discover_nics(const Topology& topology);

}  // namespace hyrun::binding
