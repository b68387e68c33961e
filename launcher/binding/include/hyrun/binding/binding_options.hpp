#pragma once
// The command-line options of GPU/CPU/memory/NIC binding and their defaults
// (docs/binding.md describes them for users).
#include <optional>
#include <string>

#include "hyrun/binding/gpu_visibility.hpp"
#include "hyrun/binding/node_share.hpp"

namespace CLI {
class App;
}

namespace hyrun::binding {

enum class BindTo {
  kPartition,  ///< default: the GPU-local cores split disjointly among the ranks sharing them
  kNuma,       ///< the whole GPU-local (NUMA/package) CPU set
  kCore,       ///< one core per rank: the first core of its partition slice
  kNone,       ///< no CPU binding (and so no memory binding)
};

enum class ReportFormat { kNone, kTable, kJson };

/// Ranks that may share one GPU group without --oversubscribe when they share evenly
/// (local ranks a multiple of the groups). 8: an 8-rank EP job fits one GPU, each rank's
/// CUDA context (~0.5 GiB) and EP buffers fit an 80 GiB GPU many times over, and beyond
/// that time-slicing (or MPS's client limit) makes it more likely a mistake than a plan.
inline constexpr int kMaxRanksPerGpu = 8;

struct BindingOptions {
  std::string topology;        ///< --topology: "" = this machine; else an XML file or synthetic description
  std::string gpus;            ///< --gpus: "" = CUDA_VISIBLE_DEVICES or all; else "0,2" or GPU- UUIDs
  int gpus_per_rank = 1;       ///< --gpus-per-rank: 0 gives CPU-only ranks
  bool oversubscribe = false;  ///< --oversubscribe: uneven or denser GPU sharing than kMaxRanksPerGpu, round-robin
  std::string nics;            ///< --nics: "" = all OpenFabrics devices; else "mlx5_0,mlx5_3"
  BindTo bind_to = BindTo::kPartition;        ///< --bind-to
  std::string cpu_map;                        ///< --cpu-map: "" or one CPU list per local rank, ':'-separated
  bool mem_bind = true;                       ///< --mem-bind on|off
  bool bind_warn_only = false;                ///< --bind-warn-only: a read-back mismatch is a warning
  std::string cpus_allowed;                   ///< --cpus-allowed: "" or a CPU list further restricting the usable CPUs
  ReportFormat report = ReportFormat::kNone;  ///< --report-bindings[=table|json]
  // Not command-line options: set by the launch mode, or by tests.
  NodeTaskShare node_share;  ///< this task among the job's tasks on its node (hybrid mode: PMIx local rank/size)
  /// Where to read the node's GPU devices (/dev, /proc); nullopt = the real ones for this
  /// machine's topology, none for --topology (another machine's).
  std::optional<SystemRoots> device_roots;
  /// TopologyCache directory for this machine's topology; nullopt: discover it at every launch.
  std::optional<std::string> topology_cache;
};

/// Registers --topology --gpus --gpus-per-rank --oversubscribe --nics --bind-to --cpu-map
/// --mem-bind --bind-warn-only --cpus-allowed --report-bindings[=table|json] on `app`, writing
/// into `options` (which must outlive app.parse()). Values that need the topology (GPU ids,
/// CPU lists) are checked by BindingPlan::compute.
void add_binding_options(CLI::App& app, BindingOptions& options);

const char* to_string(BindTo bind_to) noexcept;

}  // namespace hyrun::binding
