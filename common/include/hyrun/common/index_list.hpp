#pragma once
// The one formatter of index lists in the kernel's "cpulist" form ("0-3,8"), as taskset,
// Slurm and /sys write them: CPU and NUMA node lists in hyrun's plans and the ranks'
// read-back of their binding. (The child's async-signal-safe report in child_binding.cpp
// writes the same form without allocating.)
#include <string>
#include <vector>

namespace hyrun {

/// Compact list form of sorted OS indexes: {0,1,2,3,8} -> "0-3,8"; "" for an empty list.
std::string format_index_list(const std::vector<int>& indexes);

}  // namespace hyrun
