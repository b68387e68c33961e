#include "hyrun/binding/nic_discovery.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>

#include "hyrun/binding/gpu_discovery.hpp"

namespace hyrun::binding {
namespace {

// hwloc's Linux backend writes "Port<N>State" with the IB port state number (4 = ACTIVE).
void read_port(hwloc_obj_t osdev, NicDevice& nic) {
  bool any_state = false;
  int first_active = 0;
  for (unsigned i = 0; i < osdev->infos_count; ++i) {
    const char* name = osdev->infos[i].name;
    if (std::strncmp(name, "Port", 4) != 0) continue;
    const char* digits_end = name + 4;
    while (*digits_end >= '0' && *digits_end <= '9') ++digits_end;
    if (digits_end == name + 4 || std::strcmp(digits_end, "State") != 0) continue;
    any_state = true;
    const int port = std::stoi(std::string(name + 4, digits_end));
    if (std::strcmp(osdev->infos[i].value, "4") == 0 && (first_active == 0 || port < first_active)) first_active = port;
  }
  if (!any_state) return;  // no port information: assume port 1, documented
  nic.active = first_active != 0;
  nic.port = first_active != 0 ? first_active : 1;
}

}  // namespace

std::vector<NicDevice> discover_nics(const Topology& topology) {
  std::vector<NicDevice> nics;
  for (hwloc_obj_t o = hwloc_get_next_osdev(topology.get(), nullptr); o; o = hwloc_get_next_osdev(topology.get(), o)) {
    if (o->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS || !o->name) continue;
    NicDevice nic;
    nic.name = o->name;
    hwloc_obj_t parent = o->parent;
    if (parent && parent->type == HWLOC_OBJ_PCI_DEVICE) {
      nic.pci = parent;
      nic.pci_bus_id = pci_bus_id(parent);
    } else {
      nic.pci = o;
    }
    read_port(o, nic);
    nics.push_back(std::move(nic));
  }
  std::sort(nics.begin(), nics.end(), [](const NicDevice& a, const NicDevice& b) {
    return std::tie(a.pci_bus_id, a.name) < std::tie(b.pci_bus_id, b.name);
  });
  return nics;
}

}  // namespace hyrun::binding
