#pragma once
// CPU/NUMA index lists in the kernel's "cpulist" syntax ("0-3,8,10-11"), as taskset,
// Slurm and /sys use them. Indexes are OS (physical) indexes, never hwloc logical ones.
#include <string>
#include <string_view>
#include <vector>

#include "hyrun/common/index_list.hpp"

namespace hyrun::binding {

/// Parses "0-3,8,10-11" into sorted, unique indexes. `what` names the input in errors
/// (e.g. "--cpus-allowed"). Throws UsageError for empty text, bad syntax or a reversed range.
std::vector<int> parse_cpu_list(std::string_view text, std::string_view what);

/// Formats sorted indexes compactly ("0-3,8"); "" for an empty list. The project's one
/// formatter (hyrun/common/index_list.hpp), under the name that pairs with parse_cpu_list.
inline std::string format_cpu_list(const std::vector<int>& indexes) { return format_index_list(indexes); }

}  // namespace hyrun::binding
