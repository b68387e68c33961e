#include "hyrun/binding/binding_options.hpp"

#include <CLI/CLI.hpp>

#include <map>

namespace hyrun::binding {

const char* to_string(BindTo bind_to) noexcept {
  switch (bind_to) {
    case BindTo::kPartition: return "partition";
    case BindTo::kNuma: return "numa";
    case BindTo::kCore: return "core";
    case BindTo::kNone: return "none";
  }
  return "?";
}

void add_binding_options(CLI::App& app, BindingOptions& options) {
  const std::string group = "Binding";
  app.add_option("--topology", options.topology,
                 "Plan against this hwloc XML file or synthetic description (e.g. 'pack:2 core:8 pu:2') "
                 "instead of this machine; such plans can only be shown (--dry-run)")
      ->group(group);
  app.add_option(
         "--gpus", options.gpus,
         "GPUs to use, comma-separated indexes (PCI bus order) or GPU- UUIDs; default: CUDA_VISIBLE_DEVICES, else all")
      ->group(group);
  app.add_option("--gpus-per-rank", options.gpus_per_rank, "GPUs per local rank (0: CPU-only ranks)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str()
      ->group(group);
  app.add_flag("--oversubscribe", options.oversubscribe, "Allow more ranks than GPUs (assigned round-robin)")
      ->group(group);
  app.add_option("--nics", options.nics,
                 "OpenFabrics devices ranks may use, comma-separated (e.g. mlx5_0,mlx5_3); default: all")
      ->group(group);
  const std::map<std::string, BindTo> bind_to{
      {"partition", BindTo::kPartition}, {"numa", BindTo::kNuma}, {"core", BindTo::kCore}, {"none", BindTo::kNone}};
  app.add_option("--bind-to", options.bind_to,
                 "CPU binding: partition (GPU-local cores split among ranks, default), numa (whole GPU-local set), "
                 "core (one core per rank), none")
      ->transform(CLI::CheckedTransformer(bind_to, CLI::ignore_case))
      ->default_str("partition")
      ->group(group);
  app.add_option("--cpu-map", options.cpu_map,
                 "Explicit CPUs per local rank, ':'-separated CPU lists (OS indexes), e.g. 0-3:4-7")
      ->group(group);
  const std::map<std::string, bool> on_off{{"on", true}, {"off", false}};
  app.add_option("--mem-bind", options.mem_bind, "Bind memory to the NUMA node(s) of the rank's CPUs (on|off)")
      ->transform(CLI::CheckedTransformer(on_off, CLI::ignore_case))
      ->default_str("on")
      ->group(group);
  app.add_flag("--bind-warn-only", options.bind_warn_only,
               "Warn instead of failing when a rank's binding reads back different from the plan")
      ->group(group);
  app.add_option("--cpus-allowed", options.cpus_allowed,
                 "Restrict usable CPUs to this list (OS indexes), on top of the cpuset and binding hyrun inherits")
      ->group(group);
  // A flag with an optional "=value", so that a bare --report-bindings never swallows the next word.
  app.add_flag("--report-bindings{table}")
      ->description("Print the binding plan before launch: --report-bindings (table) or --report-bindings=json")
      ->check(CLI::IsMember({"table", "json"}))
      ->each([&options](const std::string& value) {
        options.report = value == "json" ? ReportFormat::kJson : ReportFormat::kTable;
      })
      ->group(group);
}

}  // namespace hyrun::binding
