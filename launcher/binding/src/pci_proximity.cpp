#include "hyrun/binding/pci_proximity.hpp"

#include <vector>

namespace hyrun::binding {
namespace {

// hwloc_get_common_ancestor_obj compares depths, which are negative for I/O objects;
// walking parents works for every kind.
hwloc_obj_t common_ancestor(hwloc_obj_t a, hwloc_obj_t b) {
  std::vector<hwloc_obj_t> chain;
  for (hwloc_obj_t o = a; o; o = o->parent) chain.push_back(o);
  for (hwloc_obj_t o = b; o; o = o->parent)
    for (hwloc_obj_t c : chain)
      if (c == o) return o;
  return nullptr;
}

}  // namespace

PciProximity pci_proximity(hwloc_obj_t a, hwloc_obj_t b) {
  hwloc_obj_t c = common_ancestor(a, b);
  if (!c) return PciProximity::kSameMachine;
  if (c->type == HWLOC_OBJ_BRIDGE)
    return c->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST ? PciProximity::kSameHostBridge
                                                                  : PciProximity::kSamePcieSwitch;
  if (c->type == HWLOC_OBJ_PCI_DEVICE || c->type == HWLOC_OBJ_OS_DEVICE) return PciProximity::kSamePcieSwitch;
  if (c->nodeset && hwloc_bitmap_weight(c->nodeset) == 1) return PciProximity::kSameNumaNode;
  for (hwloc_obj_t o = c; o; o = o->parent)
    if (o->type == HWLOC_OBJ_PACKAGE) return PciProximity::kSamePackage;
  return PciProximity::kSameMachine;
}

std::string describe(PciProximity proximity) {
  switch (proximity) {
    case PciProximity::kSamePcieSwitch: return "same PCIe switch";
    case PciProximity::kSameHostBridge: return "same host bridge";
    case PciProximity::kSameNumaNode: return "same NUMA node";
    case PciProximity::kSamePackage: return "same package";
    case PciProximity::kSameMachine: return "same machine only";
  }
  return "unknown";
}

}  // namespace hyrun::binding
