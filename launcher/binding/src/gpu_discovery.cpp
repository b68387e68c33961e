#include "hyrun/binding/gpu_discovery.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <tuple>

namespace hyrun::binding {
namespace {

constexpr unsigned kNvidiaVendor = 0x10de;

bool has_cuda_osdev(hwloc_obj_t pci) {
  for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
    if (c->type != HWLOC_OBJ_OS_DEVICE || !c->name) continue;
    if (std::strncmp(c->name, "cuda", 4) == 0 || std::strncmp(c->name, "nvml", 4) == 0) return true;
  }
  return false;
}

// The UUID may sit on the PCI object (fixtures: GPUUUID) or on its nvml OS device (NVIDIAUUID).
std::string find_uuid(hwloc_obj_t pci) {
  for (const char* key : {"GPUUUID", "NVIDIAUUID"}) {
    if (const char* v = hwloc_obj_get_info_by_name(pci, key)) return v;
    for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling)
      if (c->type == HWLOC_OBJ_OS_DEVICE)
        if (const char* v = hwloc_obj_get_info_by_name(c, key)) return v;
  }
  return {};
}

}  // namespace

std::string pci_bus_id(hwloc_obj_t pci) {
  const auto& a = pci->attr->pcidev;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%01x", static_cast<unsigned>(a.domain), a.bus, a.dev, a.func);
  return buf;
}

std::vector<GpuDevice> discover_gpus(const Topology& topology) {
  std::vector<GpuDevice> gpus;
  for (hwloc_obj_t p = hwloc_get_next_pcidev(topology.get(), nullptr); p;
       p = hwloc_get_next_pcidev(topology.get(), p)) {
    const auto& a = p->attr->pcidev;
    const bool nvidia_gpu_class = a.vendor_id == kNvidiaVendor && (a.class_id == 0x0300 || a.class_id == 0x0302);
    if (!nvidia_gpu_class && !has_cuda_osdev(p)) continue;
    gpus.push_back(GpuDevice{0, pci_bus_id(p), find_uuid(p), p});
  }
  std::sort(gpus.begin(), gpus.end(), [](const GpuDevice& x, const GpuDevice& y) {
    const auto& a = x.pci->attr->pcidev;
    const auto& b = y.pci->attr->pcidev;
    return std::tie(a.domain, a.bus, a.dev, a.func) < std::tie(b.domain, b.bus, b.dev, b.func);
  });
  for (std::size_t i = 0; i < gpus.size(); ++i) gpus[i].ordinal = static_cast<int>(i);
  return gpus;
}

}  // namespace hyrun::binding
