#include "hyrun/binding/cpu_partition.hpp"

#include <algorithm>

#include "hyrun/binding/bitmap.hpp"

namespace hyrun::binding {

std::vector<std::vector<int>> cores_in(const Topology& topology, hwloc_const_cpuset_t set) {
  std::vector<std::vector<int>> cores;
  const hwloc_obj_type_t type =
      hwloc_get_nbobjs_by_type(topology.get(), HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  for (hwloc_obj_t o = hwloc_get_next_obj_by_type(topology.get(), type, nullptr); o;
       o = hwloc_get_next_obj_by_type(topology.get(), type, o)) {
    Bitmap pus = Bitmap::copy_of(o->cpuset);
    pus.intersect(set);
    if (!pus.empty()) cores.push_back(pus.indexes());
  }
  return cores;
}

std::vector<CpuSlice> partition_cores(const std::vector<std::vector<int>>& cores, int parts) {
  std::vector<CpuSlice> slices(static_cast<std::size_t>(std::max(parts, 0)));
  const std::size_t n = slices.size();
  if (n == 0 || cores.empty()) return slices;
  const std::size_t c = cores.size();
  if (c >= n) {
    for (std::size_t j = 0; j < n; ++j) {
      for (std::size_t k = j * c / n; k < (j + 1) * c / n; ++k) {
        slices[j].pus.insert(slices[j].pus.end(), cores[k].begin(), cores[k].end());
        ++slices[j].whole_cores;
      }
      std::sort(slices[j].pus.begin(), slices[j].pus.end());
    }
    return slices;
  }
  std::vector<int> pus;
  for (const auto& core : cores) pus.insert(pus.end(), core.begin(), core.end());
  const std::size_t p = pus.size();
  for (std::size_t j = 0; j < n; ++j) {
    if (p >= n) {
      slices[j].pus.assign(pus.begin() + static_cast<long>(j * p / n),
                           pus.begin() + static_cast<long>((j + 1) * p / n));
      std::sort(slices[j].pus.begin(), slices[j].pus.end());
    } else {
      slices[j].pus = {pus[j % p]};
      slices[j].shared = true;
    }
  }
  return slices;
}

}  // namespace hyrun::binding
