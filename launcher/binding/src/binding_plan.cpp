#include "hyrun/binding/binding_plan.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <tuple>

#include "hyrun/binding/bitmap.hpp"
#include "hyrun/binding/cpu_list.hpp"
#include "hyrun/binding/cpu_partition.hpp"
#include "hyrun/binding/gpu_discovery.hpp"
#include "hyrun/binding/nic_discovery.hpp"
#include "hyrun/binding/pci_proximity.hpp"
#include "hyrun/binding/task_resources.hpp"
#include "hyrun/binding/topology.hpp"
#include "hyrun/binding/topology_cache.hpp"
#include "hyrun/common/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace hyrun::binding {
namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t at = text.find(sep, start);
    out.push_back(text.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

std::string list_of(hwloc_const_bitmap_t set) { return format_cpu_list(Bitmap::copy_of(set).indexes()); }

std::string object_name(hwloc_obj_t o) {
  return std::string(hwloc_obj_type_string(o->type)) + " L#" + std::to_string(o->logical_index);
}

// CPUs this task may use: hwloc's allowed set, the binding it inherited (srun's
// task/affinity shows only there) and --cpus-allowed.
Bitmap usable_cpus(const Topology& topo, const BindingOptions& options) {
  Bitmap usable = Bitmap::copy_of(hwloc_topology_get_allowed_cpuset(topo.get()));
  std::string origin = "hwloc's allowed cpuset";
  if (topo.is_this_system()) {
    Bitmap bound;
    if (hwloc_get_cpubind(topo.get(), bound.get(), 0) == 0) {
      usable.intersect(bound.get());
      origin = "the allowed cpuset and this process's CPU binding";
    } else {
      spdlog::warn("binding: cannot read this process's CPU binding ({}); using the allowed cpuset only",
                   std::strerror(errno));
    }
  }
  if (usable.empty()) throw Error("binding: no usable CPU: " + origin + " have no CPU in common");
  if (!options.cpus_allowed.empty()) {
    const auto wanted = parse_cpu_list(options.cpus_allowed, "--cpus-allowed");
    const Bitmap complete = Bitmap::copy_of(hwloc_topology_get_complete_cpuset(topo.get()));
    for (int cpu : wanted)
      if (!hwloc_bitmap_isset(complete.get(), static_cast<unsigned>(cpu)))
        throw UsageError("--cpus-allowed '" + options.cpus_allowed + "' names CPU " + std::to_string(cpu) +
                         ", which this node does not have (its CPUs are " + list_of(complete.get()) + ")");
    const std::string before = list_of(usable.get());
    usable.intersect(Bitmap::from_indexes(wanted).get());
    if (usable.empty())
      throw UsageError("--cpus-allowed '" + options.cpus_allowed +
                       "' has no CPU in common with the CPUs this task may use (" + before + ", from " + origin +
                       "); choose CPUs among those");
  }
  for (int cpu : usable.indexes())
    if (cpu >= CPU_SETSIZE)
      throw Error("binding: CPU " + std::to_string(cpu) + " is beyond the " + std::to_string(CPU_SETSIZE) +
                  " CPUs hyrun can bind");
  return usable;
}

struct RankWork {
  RankPlacement placement;
  std::vector<hwloc_obj_t> gpu_objects;
  Bitmap locality;            // CPUs local to the rank's GPUs (or all usable), within usable
  std::string locality_name;  // for reasons: "Package L#0"
  bool gpu_shared = false;    // another rank has the same GPUs
};

std::string gpu_label(const std::vector<GpuAssignment>& gpus) {
  std::vector<std::string> ids;
  for (const auto& g : gpus) ids.push_back(std::to_string(g.index));
  return (gpus.size() == 1 ? "GPU " : "GPUs ") + fmt::format("{}", fmt::join(ids, ","));
}

// GPUs per rank: consecutive groups of K from the allowed list, round-robin when oversubscribed.
void assign_gpus(const BindingOptions& options, const std::vector<GpuAssignment>& allowed,
                 const std::vector<GpuDevice>& devices, std::vector<RankWork>& ranks) {
  const int n = static_cast<int>(ranks.size());
  const int k = options.gpus_per_rank;
  if (k == 0 || allowed.empty()) return;
  const int total = static_cast<int>(allowed.size());
  const int slots = total / k;
  std::vector<std::string> ids;
  for (const auto& g : allowed) ids.push_back(g.visible_id);
  if (slots == 0)
    throw UsageError("--gpus-per-rank " + std::to_string(k) + " needs at least " + std::to_string(k) +
                     " GPUs, but this task may use only " + std::to_string(total) + " (" +
                     fmt::format("{}", fmt::join(ids, ",")) + "); lower --gpus-per-rank");
  // Even sharing of up to kMaxRanksPerGpu ranks per GPU group needs no flag (ranks of a
  // single-GPU machine running an 8-rank EP job); uneven or denser sharing must be asked for.
  const bool even_sharing = n % slots == 0 && n / slots <= kMaxRanksPerGpu;
  if (n > slots && !even_sharing && !options.oversubscribe)
    throw UsageError(std::to_string(n) + " local ranks with --gpus-per-rank " + std::to_string(k) + " need " +
                     std::to_string(n * k) + " GPUs, but this task may use only " + std::to_string(total) + " (" +
                     fmt::format("{}", fmt::join(ids, ",")) + "); ranks share GPUs without a flag only evenly and " +
                     "at most " + std::to_string(kMaxRanksPerGpu) + " ranks per GPU (a multiple of " +
                     std::to_string(slots) + " ranks, up to " + std::to_string(slots * kMaxRanksPerGpu) +
                     "), or add --oversubscribe to share GPUs round-robin");
  if (total % k != 0)
    spdlog::warn("binding: {} GPUs do not divide into groups of {} (--gpus-per-rank); {} stay unused", total, k,
                 total % k);
  for (int i = 0; i < n; ++i) {
    const int slot = i % slots;
    for (int j = 0; j < k; ++j) {
      const GpuAssignment& g = allowed[static_cast<std::size_t>(slot * k + j)];
      ranks[static_cast<std::size_t>(i)].placement.gpus.push_back(g);
      ranks[static_cast<std::size_t>(i)].gpu_objects.push_back(devices[static_cast<std::size_t>(g.index)].pci);
    }
  }
  for (int slot = 0; slot < std::min(slots, n); ++slot) {
    std::vector<std::string> sharers;
    for (int i = slot; i < n; i += slots) sharers.push_back(std::to_string(i));
    if (sharers.size() < 2) continue;
    for (int i = slot; i < n; i += slots) {
      RankWork& r = ranks[static_cast<std::size_t>(i)];
      r.gpu_shared = true;
      r.placement.notes.push_back(gpu_label(r.placement.gpus) + " shared by local ranks " +
                                  fmt::format("{}", fmt::join(sharers, ",")));
    }
  }
}

void compute_localities(const Topology& topo, const Bitmap& usable, std::vector<RankWork>& ranks) {
  for (auto& r : ranks) {
    if (r.gpu_objects.empty()) {
      r.locality = Bitmap::copy_of(usable.get());
      r.locality_name = "of the allowed CPUs";
      continue;
    }
    std::vector<std::string> names;
    for (hwloc_obj_t pci : r.gpu_objects) {
      hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo.get(), pci);
      r.locality.unite(anc->cpuset);
      const std::string name = object_name(anc);
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    r.locality.intersect(usable.get());
    r.locality_name =
        "local to " + gpu_label(r.placement.gpus) + " (" + fmt::format("{}", fmt::join(names, ", ")) + ")";
    if (r.locality.empty()) {
      r.placement.notes.push_back("none of the CPUs local to " + gpu_label(r.placement.gpus) +
                                  " may be used by this task; using any allowed CPU");
      r.locality = Bitmap::copy_of(usable.get());
      r.locality_name = "of the allowed CPUs (none " + r.locality_name + " is allowed)";
    }
  }
}

// Ranks whose GPU-local sets overlap share one set: it is split among all of them.
void partition_cpus(const Topology& topo, BindTo policy, std::vector<RankWork>& ranks) {
  struct Group {
    Bitmap set;
    std::vector<std::size_t> members;
  };
  // Near-linear: ranks are added to the first group they overlap, other overlapping groups
  // are moved into it (few groups: one per distinct locality), members are sorted once.
  std::vector<Group> groups;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    hwloc_const_bitmap_t locality = ranks[i].locality.get();
    std::size_t base = groups.size();
    for (std::size_t k = 0; k < groups.size();) {
      if (!hwloc_bitmap_intersects(groups[k].set.get(), locality)) {
        ++k;
        continue;
      }
      if (base == groups.size()) {
        base = k++;
        continue;
      }
      Group& into = groups[base];
      into.set.unite(groups[k].set.get());
      into.members.insert(into.members.end(), groups[k].members.begin(), groups[k].members.end());
      groups.erase(groups.begin() + static_cast<std::ptrdiff_t>(k));
    }
    if (base == groups.size()) {
      groups.push_back(Group{Bitmap::copy_of(locality), {}});
    } else {
      groups[base].set.unite(locality);
    }
    groups[base].members.push_back(i);
  }
  for (auto& g : groups) std::sort(g.members.begin(), g.members.end());
  for (const auto& g : groups) {
    const auto cores = cores_in(topo, g.set.get());
    const auto slices = partition_cores(cores, static_cast<int>(g.members.size()));
    for (std::size_t j = 0; j < g.members.size(); ++j) {
      RankWork& r = ranks[g.members[j]];
      const CpuSlice& slice = slices[j];
      const std::string share = std::to_string(g.members.size()) + (g.members.size() == 1 ? " rank" : " ranks");
      if (policy == BindTo::kCore) {
        const auto first = cores_in(topo, Bitmap::from_indexes(slice.pus).get());
        r.placement.cpus = first.empty() ? std::vector<int>{} : first.front();
        r.placement.reason = "core: one core of the " + std::to_string(cores.size()) + " cores " + r.locality_name +
                             ", split among " + share;
      } else {
        r.placement.cpus = slice.pus;
        const std::string amount =
            slice.whole_cores > 0
                ? std::to_string(slice.whole_cores) + " of " + std::to_string(cores.size()) + " cores"
                : std::to_string(slice.pus.size()) + " PU(s) of " + std::to_string(cores.size()) + " cores";
        r.placement.reason = "partition: " + amount + " " + r.locality_name + ", split among " + share;
      }
      if (slice.shared)
        r.placement.notes.push_back("more ranks than allowed CPUs " + r.locality_name + ": CPUs are shared");
    }
  }
}

void apply_cpu_map(const BindingOptions& options, const Bitmap& usable, std::vector<RankWork>& ranks) {
  if (options.bind_to != BindTo::kPartition)
    throw UsageError("--cpu-map and --bind-to " + std::string(to_string(options.bind_to)) +
                     " contradict each other; give one of them");
  const auto entries = split(options.cpu_map, ':');
  if (entries.size() < ranks.size())
    throw UsageError("--cpu-map '" + options.cpu_map + "' has " + std::to_string(entries.size()) + " entries for " +
                     std::to_string(ranks.size()) +
                     " local ranks; give one CPU list per local rank, ':'-separated (e.g. 0-3:4-7)");
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const std::string what = "--cpu-map entry " + std::to_string(i) + " of '" + options.cpu_map + "'";
    auto cpus = parse_cpu_list(entries[i], what);
    for (int cpu : cpus)
      if (!hwloc_bitmap_isset(usable.get(), static_cast<unsigned>(cpu)))
        throw UsageError(what + " has CPU " + std::to_string(cpu) +
                         ", which this task may not use (usable CPUs: " + list_of(usable.get()) + ")");
    ranks[i].placement.cpus = std::move(cpus);
    ranks[i].placement.cpu_policy = "cpu-map";
    ranks[i].placement.reason = "cpu-map: entry " + std::to_string(i) + " of --cpu-map";
  }
}

void assign_cpus(const Topology& topo, const BindingOptions& options, const Bitmap& usable,
                 std::vector<RankWork>& ranks) {
  if (!options.cpu_map.empty()) return apply_cpu_map(options, usable, ranks);
  for (auto& r : ranks) r.placement.cpu_policy = to_string(options.bind_to);
  switch (options.bind_to) {
    case BindTo::kNone:
      for (auto& r : ranks) r.placement.reason = "none: no CPU binding (--bind-to none)";
      return;
    case BindTo::kNuma: {
      // CPU-only ranks spread over the NUMA nodes that have usable CPUs.
      std::vector<hwloc_obj_t> numa;
      for (hwloc_obj_t o = hwloc_get_next_obj_by_type(topo.get(), HWLOC_OBJ_NUMANODE, nullptr); o;
           o = hwloc_get_next_obj_by_type(topo.get(), HWLOC_OBJ_NUMANODE, o))
        if (hwloc_bitmap_intersects(o->cpuset, usable.get())) numa.push_back(o);
      for (std::size_t i = 0; i < ranks.size(); ++i) {
        RankWork& r = ranks[i];
        if (r.gpu_objects.empty() && !numa.empty()) {
          hwloc_obj_t node = numa[i % numa.size()];
          Bitmap set = Bitmap::copy_of(node->cpuset);
          set.intersect(usable.get());
          r.placement.cpus = set.indexes();
          r.placement.reason =
              "numa: allowed CPUs of NUMA node " + std::to_string(node->os_index) + " (CPU-only rank, round-robin)";
        } else {
          r.placement.cpus = r.locality.indexes();
          r.placement.reason = "numa: the whole CPU set " + r.locality_name;
        }
      }
      return;
    }
    case BindTo::kPartition:
    case BindTo::kCore: return partition_cpus(topo, options.bind_to, ranks);
  }
}

void assign_memory(const Topology& topo, const BindingOptions& options, std::vector<RankWork>& ranks) {
  const hwloc_const_nodeset_t allowed_nodes = hwloc_topology_get_allowed_nodeset(topo.get());
  for (auto& r : ranks) {
    auto& p = r.placement;
    if (p.cpus.empty()) {
      p.reason += "; memory not bound (no CPU binding)";
      continue;
    }
    Bitmap nodes;
    hwloc_cpuset_to_nodeset(topo.get(), Bitmap::from_indexes(p.cpus).get(), nodes.get());
    nodes.intersect(allowed_nodes);
    p.numa_nodes = nodes.indexes();
    for (int node : p.numa_nodes)
      if (node >= static_cast<int>(ChildBinding::kMaxNumaNodes))
        throw Error("binding: NUMA node " + std::to_string(node) + " is beyond the nodes hyrun can bind");
    p.mem_bind = options.mem_bind && !p.numa_nodes.empty();
    p.reason += p.mem_bind         ? "; memory bound to NUMA " + format_cpu_list(p.numa_nodes)
                : options.mem_bind ? std::string("; memory not bound (no allowed NUMA node)")
                                   : std::string("; memory not bound (--mem-bind off)");
  }
}

std::vector<NicDevice> usable_nics(const Topology& topo, const BindingOptions& options) {
  auto nics = discover_nics(topo);
  if (!options.nics.empty()) {
    std::vector<std::string> names;
    for (const auto& n : nics) names.push_back(n.name);
    std::vector<NicDevice> chosen;
    for (const auto& wanted : split(options.nics, ',')) {
      // "mlx5_0:2" picks the port; "mlx5_0" takes the active one.
      const std::size_t colon = wanted.find(':');
      const std::string name = wanted.substr(0, colon);
      auto it = std::find_if(nics.begin(), nics.end(), [&](const NicDevice& n) { return n.name == name; });
      if (it == nics.end())
        throw UsageError(
            "--nics '" + options.nics + "' names '" + wanted + "', which is not an OpenFabrics device of this node (" +
            (names.empty() ? std::string("it has none") : "it has " + fmt::format("{}", fmt::join(names, ", "))) + ")");
      chosen.push_back(*it);
      if (colon != std::string::npos) {
        const std::string port = wanted.substr(colon + 1);
        if (port.empty() || port.size() > 3 || port.find_first_not_of("0123456789") != std::string::npos || port == "0")
          throw UsageError("--nics '" + options.nics + "' has '" + wanted + "' whose port '" + port +
                           "' is not a port number; write NAME or NAME:PORT, e.g. mlx5_0:1");
        chosen.back().port = std::stoi(port);
        chosen.back().active = true;  // the user's explicit choice
      }
    }
    nics = std::move(chosen);
  }
  std::vector<NicDevice> active;
  for (auto& n : nics) {
    if (n.active)
      active.push_back(std::move(n));
    else
      spdlog::warn("binding: NIC {} has no ACTIVE port; not used", n.name);
  }
  return active;
}

void assign_nics(const Topology& topo, const BindingOptions& options, const EnvironmentLookup& env,
                 std::vector<RankWork>& ranks) {
  if (const auto user = env("UCX_NET_DEVICES")) {
    for (auto& r : ranks) {
      r.placement.nic_source = "user-set";
      r.placement.nics = split(*user, ',');
      r.placement.reason += "; NIC: UCX_NET_DEVICES user-set, left alone";
    }
    return;
  }
  const auto nics = usable_nics(topo, options);
  if (nics.empty()) {
    for (auto& r : ranks) {
      r.placement.nic_source = "none";
      r.placement.reason += "; no RDMA NIC";
    }
    return;
  }
  std::vector<std::vector<int>> users(nics.size());
  for (auto& r : ranks) {
    auto& p = r.placement;
    std::vector<std::string> why;
    // Each GPU's nearest NIC; CPU-only ranks the NIC nearest their CPUs.
    const std::size_t targets = std::max<std::size_t>(r.gpu_objects.size(), 1);
    for (std::size_t t = 0; t < targets; ++t) {
      std::size_t best = 0;
      std::tuple<int, std::size_t, std::size_t> best_key{1 << 20, 0, 0};
      for (std::size_t k = 0; k < nics.size(); ++k) {
        int distance;
        if (!r.gpu_objects.empty()) {
          distance = static_cast<int>(pci_proximity(r.gpu_objects[t], nics[k].pci));
        } else {
          hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo.get(), nics[k].pci);
          distance =
              !p.cpus.empty() && hwloc_bitmap_intersects(anc->cpuset, Bitmap::from_indexes(p.cpus).get()) ? 0 : 1;
        }
        // Ties go to the NIC fewest ranks use so far, then PCI order.
        const std::tuple<int, std::size_t, std::size_t> key{distance, users[k].size(), k};
        if (key < best_key) {
          best_key = key;
          best = k;
        }
      }
      const std::string name = nics[best].ucx_name();
      if (std::find(p.nics.begin(), p.nics.end(), name) != p.nics.end()) continue;
      p.nics.push_back(name);
      if (std::find(users[best].begin(), users[best].end(), p.local_rank) == users[best].end())
        users[best].push_back(p.local_rank);
      if (!r.gpu_objects.empty())
        why.push_back(nics[best].name + " (" + describe(static_cast<PciProximity>(std::get<0>(best_key))) + " as GPU " +
                      std::to_string(p.gpus[t].index) + ")");
      else
        why.push_back(nics[best].name +
                      (std::get<0>(best_key) == 0 ? " (local to the rank's CPUs)" : " (not local, least used)"));
    }
    p.nic_source = "nearest";
    p.reason += "; NIC " + fmt::format("{}", fmt::join(why, ", "));
  }
  for (std::size_t k = 0; k < nics.size(); ++k) {
    if (users[k].size() < 2) continue;
    std::vector<std::string> ids;
    for (int u : users[k]) ids.push_back(std::to_string(u));
    for (int u : users[k])
      ranks[static_cast<std::size_t>(u)].placement.notes.push_back(
          "NIC " + nics[k].ucx_name() + " is shared by local ranks " + fmt::format("{}", fmt::join(ids, ",")));
  }
}

void build_environment(const std::vector<GpuAssignment>& allowed_gpus, const BindingOptions& options,
                       RankPlacement& p) {
  if (!p.gpus.empty()) {
    std::vector<std::string> ids;
    for (const auto& g : p.gpus) ids.push_back(g.visible_id);
    p.environment.emplace_back("CUDA_VISIBLE_DEVICES", fmt::format("{}", fmt::join(ids, ",")));
    p.environment.emplace_back("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
  } else if (options.gpus_per_rank == 0 && !allowed_gpus.empty()) {
    p.environment.emplace_back("CUDA_VISIBLE_DEVICES", "");  // CPU-only by request: hide the GPUs
  }
  if (p.nic_source == "nearest" && !p.nics.empty())
    p.environment.emplace_back("UCX_NET_DEVICES", fmt::format("{}", fmt::join(p.nics, ",")));
}

ChildBinding make_child_binding(const RankPlacement& p, bool warn_only) {
  ChildBinding b;
  b.local_rank = p.local_rank;
  b.warn_only = warn_only;
  b.bind_cpus = !p.cpus.empty();
  CPU_ZERO(&b.cpus);
  for (int cpu : p.cpus) CPU_SET(static_cast<std::size_t>(cpu), &b.cpus);
  b.bind_memory = p.mem_bind;
  constexpr std::size_t bits = 8 * sizeof(unsigned long);
  for (int node : p.numa_nodes)
    b.nodes[static_cast<std::size_t>(node) / bits] |= 1UL << (static_cast<std::size_t>(node) % bits);
  return b;
}

Topology load_topology(const BindingOptions& options) {
  if (!options.topology.empty()) return Topology::load_from(options.topology);
  if (options.topology_cache) return TopologyCache(*options.topology_cache).load();
  return Topology::load_this_system();
}

}  // namespace

EnvironmentLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

BindingPlan BindingPlan::compute(const BindingOptions& options, int local_ranks, const EnvironmentLookup& env) {
  if (local_ranks < 1)
    throw UsageError("the number of local ranks is " + std::to_string(local_ranks) + "; it must be at least 1");
  if (options.gpus_per_rank < 0)
    throw UsageError("--gpus-per-rank " + std::to_string(options.gpus_per_rank) + " is negative; give 0 or more");
  auto loaded = std::make_shared<Topology>(load_topology(options));
  const Topology& topo = *loaded;
  // This task's CPUs and GPUs: the node's view of them, and its share of the node when
  // other tasks of the job run there (task_resources.hpp).
  std::vector<std::string> task_notes;
  const Bitmap usable = task_cpus(topo, options, usable_cpus(topo, options), task_notes);
  const auto devices = discover_gpus(topo);
  const auto allowed_gpus = task_gpus(topo, options, devices, env, task_notes);
  spdlog::debug("binding: topology {}: {} GPU(s), {} allowed, usable CPUs {}", topo.description(), devices.size(),
                allowed_gpus.size(), list_of(usable.get()));

  std::vector<RankWork> work(static_cast<std::size_t>(local_ranks));
  for (int i = 0; i < local_ranks; ++i) work[static_cast<std::size_t>(i)].placement.local_rank = i;
  assign_gpus(options, allowed_gpus, devices, work);
  compute_localities(topo, usable, work);
  assign_cpus(topo, options, usable, work);
  assign_memory(topo, options, work);
  assign_nics(topo, options, env, work);

  BindingPlan plan;
  plan.this_system_ = topo.is_this_system();
  plan.topology_ = std::move(loaded);
  plan.topology_description_ = topo.description();
  for (auto& r : work) {
    auto& p = r.placement;
    const std::string gpu_part = p.gpus.empty() ? std::string("no GPU (CPU-only rank)")
                                                : gpu_label(p.gpus) + (r.gpu_shared ? " (shared round-robin)" : "");
    p.reason = gpu_part + "; " + p.reason;
    p.notes.insert(p.notes.end(), task_notes.begin(), task_notes.end());
    build_environment(allowed_gpus, options, p);
    plan.child_bindings_.push_back(make_child_binding(p, options.bind_warn_only));
    plan.ranks_.push_back(std::move(p));
  }
  return plan;
}

void BindingPlan::require_applicable() const {
  if (!this_system_)
    throw UsageError("the binding plan was made from a topology that is not this machine's (" + topology_description_ +
                     "; hwloc: not this system), so it cannot be applied here and hyrun does not launch with it; "
                     "use --dry-run to show the plan, or drop --topology (and HWLOC_XMLFILE/HWLOC_SYNTHETIC) to bind "
                     "with this machine's topology");
}

ChildBinding BindingPlan::child_binding(int local_rank) const {
  require_applicable();
  return child_bindings_.at(static_cast<std::size_t>(local_rank));
}

}  // namespace hyrun::binding
