#include "hyrun/binding/node_share.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hyrun/binding/cpu_list.hpp"
#include "hyrun/binding/cpu_partition.hpp"

namespace hyrun::binding {

Bitmap share_of_cpus(const Topology& topology, const Bitmap& usable, NodeTaskShare share, std::string& note) {
  if (share.count <= 1) return Bitmap::copy_of(usable.get());
  const auto cores = cores_in(topology, usable.get());
  const auto slices = partition_cores(cores, share.count);
  const CpuSlice& mine = slices.at(static_cast<std::size_t>(share.index));
  note = fmt::format("CPUs {} of {}: share {} of {} among this job's tasks on the node{}", format_cpu_list(mine.pus),
                     format_cpu_list(usable.indexes()), share.index, share.count,
                     mine.shared ? " (fewer CPUs than tasks: shared)" : "");
  return Bitmap::from_indexes(mine.pus);
}

std::vector<GpuAssignment> share_of_gpus(const std::vector<GpuAssignment>& gpus, NodeTaskShare share,
                                         std::string& note) {
  if (share.count <= 1 || gpus.empty()) return gpus;
  const std::size_t n = gpus.size();
  const auto tasks = static_cast<std::size_t>(share.count);
  if (n < tasks) {
    note = fmt::format("{} GPU(s) for {} tasks on this node: every task uses them all", n, tasks);
    return gpus;
  }
  const auto i = static_cast<std::size_t>(share.index);
  std::vector<GpuAssignment> mine(gpus.begin() + static_cast<long>(i * n / tasks),
                                  gpus.begin() + static_cast<long>((i + 1) * n / tasks));
  std::vector<std::string> ids;
  for (const auto& g : mine) ids.push_back(std::to_string(g.index));
  note = fmt::format("GPUs {}: share {} of {} among this job's tasks on the node", fmt::join(ids, ","), share.index,
                     share.count);
  return mine;
}

}  // namespace hyrun::binding
