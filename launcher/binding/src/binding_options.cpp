#include "hyrun/binding/binding_options.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <map>
#include <string>
#include <type_traits>
#include <vector>

namespace hyrun::binding {
namespace {

// An option whose value is one of `words` (any case), its default shown in --help; another
// value is named with the words it may be.
template <class T>
void add_word_option(CLI::App& app, const std::string& name, T& target, const std::map<std::string, T>& words,
                     const std::string& fallback, const std::string& help, const std::string& group) {
  static_assert(std::is_enum_v<T> || std::is_same_v<T, bool>);
  std::vector<std::string> allowed;
  for (const auto& [word, value] : words) allowed.push_back(word);
  const CLI::Validator one_of(
      [words, allowed](std::string& value) -> std::string {
        const auto it = words.find(CLI::detail::to_lower(value));
        if (it == words.end()) return fmt::format("'{}' is not one of {}", value, fmt::join(allowed, ", "));
        if constexpr (std::is_enum_v<T>)  // as CLI11 reads an enum: its number
          value = std::to_string(static_cast<std::underlying_type_t<T>>(it->second));
        else
          value = it->second ? "true" : "false";
        return "";
      },
      "", "one of the option's words");
  app.add_option(name, target, help)->transform(one_of)->default_str(fallback)->group(group);
}

}  // namespace

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
  add_word_option(
      app, "--bind-to", options.bind_to,
      {{"partition", BindTo::kPartition}, {"numa", BindTo::kNuma}, {"core", BindTo::kCore}, {"none", BindTo::kNone}},
      "partition",
      "CPU binding: partition (GPU-local cores split among ranks, default), numa (whole GPU-local set), "
      "core (one core per rank), none",
      group);
  app.add_option("--cpu-map", options.cpu_map,
                 "Explicit CPUs per local rank, ':'-separated CPU lists (OS indexes), e.g. 0-3:4-7")
      ->group(group);
  add_word_option(app, "--mem-bind", options.mem_bind, {{"on", true}, {"off", false}}, "on",
                  "Bind memory to the NUMA node(s) of the rank's CPUs (on|off)", group);
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
