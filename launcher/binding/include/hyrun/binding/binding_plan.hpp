#pragma once
// The placement of every local rank (GPUs, CPUs, NUMA memory, NIC, environment), computed
// once in the parent from the hwloc topology, reported before launch, applied per child.
//
// Launcher sequence (docs/binding.md):
//   BindingOptions opts; add_binding_options(app, opts);         // before app.parse()
//   auto plan = BindingPlan::compute(opts, n);                   // after parsing; UsageError -> exit 2
//   if (opts.report == ReportFormat::kTable) print(plan.report_table(rank_offset));
//   if (opts.report == ReportFormat::kJson)  print(plan.report_json(rank_offset).dump(2));
//   if (dry_run) exit 0;
//   plan.require_applicable();                                    // refuses --topology plans
//   per rank i: env += plan.ranks()[i].environment; auto cb = plan.child_binding(i);  // before fork
//   in the child: char msg[256]; int rc = apply_child_binding(cb, msg, sizeof msg);
//                 rc != 0 -> report msg through the exec-error pipe and _exit; msg[0] -> warn; exec
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "hyrun/binding/binding_options.hpp"
#include "hyrun/binding/child_binding.hpp"
#include "hyrun/binding/gpu_selection.hpp"
#include "hyrun/binding/topology.hpp"

namespace hyrun::binding {

/// Reads a variable of the task's environment; nullopt when unset. Tests inject their own.
using EnvironmentLookup = std::function<std::optional<std::string>(const std::string& name)>;
/// The lookup of this process's real environment (getenv).
EnvironmentLookup process_environment();

struct RankPlacement {
  int local_rank = 0;
  std::vector<GpuAssignment> gpus;  ///< empty for a CPU-only rank
  std::vector<int> cpus;            ///< OS indexes the rank is bound to; empty = not bound (--bind-to none)
  std::string cpu_policy;           ///< "partition", "numa", "core", "none" or "cpu-map"
  std::vector<int> numa_nodes;      ///< OS indexes of the NUMA nodes of `cpus`
  bool mem_bind = false;            ///< memory is bound (MPOL_BIND) to numa_nodes
  std::vector<std::string> nics;    ///< "mlx5_3:1"; the user's own list when nic_source is "user-set"
  std::string nic_source;           ///< "nearest", "user-set" (UCX_NET_DEVICES kept) or "none"
  std::string reason;               ///< why: the policy decisions in one line
  std::vector<std::string> notes;   ///< remarks such as a NIC shared with other ranks
  /// Variables to set for the rank (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, UCX_NET_DEVICES).
  std::vector<std::pair<std::string, std::string>> environment;
};

class BindingPlan {
 public:
  /// Loads the topology (this machine, or options.topology) and computes placements for
  /// `local_ranks` ranks. Reads CUDA_VISIBLE_DEVICES and UCX_NET_DEVICES through `env`.
  /// Throws UsageError for bad input (unknown GPU, MIG, too many ranks, empty CPU set, bad
  /// --cpu-map or --topology, ...), hyrun::Error when hwloc fails.
  static BindingPlan compute(const BindingOptions& options, int local_ranks,
                             const EnvironmentLookup& env = process_environment());

  const std::vector<RankPlacement>& ranks() const noexcept { return ranks_; }
  /// False when the plan was made from --topology: it describes another machine.
  bool is_this_system() const noexcept { return this_system_; }
  /// "this system", "XML file X" or "synthetic 'X'".
  const std::string& topology_description() const noexcept { return topology_description_; }
  /// The topology the plan was made from, shared so that others need not load it again (a
  /// load costs tens of milliseconds).
  const std::shared_ptr<const Topology>& topology() const noexcept { return topology_; }

  /// Throws UsageError unless the plan can be applied here (see docs/binding.md: a plan made
  /// from --topology is for --dry-run only; hyrun refuses to launch with it).
  void require_applicable() const;

  /// Human-readable table, one row per rank, global rank = rank_offset + local rank.
  std::string report_table(int rank_offset) const;
  /// JSON array, one object per rank (schema in docs/binding.md).
  nlohmann::json report_json(int rank_offset) const;

  /// Plain-data binding of one local rank for apply_child_binding. Calls require_applicable();
  /// throws std::out_of_range for a bad local rank.
  ChildBinding child_binding(int local_rank) const;

 private:
  std::vector<RankPlacement> ranks_;
  std::vector<ChildBinding> child_bindings_;
  bool this_system_ = false;
  std::string topology_description_;
  std::shared_ptr<const Topology> topology_;
};

}  // namespace hyrun::binding
