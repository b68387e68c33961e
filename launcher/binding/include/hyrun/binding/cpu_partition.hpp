#pragma once
// Splitting a set of cores evenly and disjointly among ranks: whole cores first, so that
// hyperthreads of one core stay with one rank; PUs are split only when there are fewer
// cores than ranks, and shared only when there are fewer PUs than ranks.
#include <hwloc.h>

#include <vector>

#include "hyrun/binding/topology.hpp"

namespace hyrun::binding {

/// The PUs (OS indexes) of `set`, grouped by core in hwloc logical order. A core only partly
/// in `set` contributes its PUs that are. Without Core objects each PU is its own core.
std::vector<std::vector<int>> cores_in(const Topology& topology, hwloc_const_cpuset_t set);

struct CpuSlice {
  std::vector<int> pus;  ///< sorted OS indexes
  int whole_cores = 0;   ///< number of cores the slice holds (0 when cores had to be split)
  bool shared = false;   ///< another slice holds the same PU (more ranks than PUs)
};

/// `parts` slices of `cores`: contiguous runs of cores, sizes differing by at most one.
std::vector<CpuSlice> partition_cores(const std::vector<std::vector<int>>& cores, int parts);

}  // namespace hyrun::binding
