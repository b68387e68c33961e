#include "hyrun/binding/gpu_selection.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "hyrun/common/error.hpp"

namespace hyrun::binding {
namespace {

std::string trim(std::string s) {
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    out.push_back(trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

std::string known_indexes(const std::vector<GpuDevice>& gpus) {
  if (gpus.empty()) return "this node has no GPU";
  return "this node has " + std::to_string(gpus.size()) + " GPU(s), indexes 0-" + std::to_string(gpus.size() - 1) +
         " in PCI bus id order";
}

// Resolves one entry to an ordinal; `source` names where it came from for messages.
int resolve(const std::vector<GpuDevice>& gpus, const std::string& entry, const std::string& source) {
  const std::string where = "GPU '" + entry + "' in " + source;
  if (entry.rfind("MIG-", 0) == 0)
    throw UsageError(where + " is a MIG instance; MIG is not supported by hyrun's GPU binding: give whole GPUs as "
                     "indexes or GPU- UUIDs");
  if (entry.rfind("GPU-", 0) == 0) {
    const bool any_uuid = std::any_of(gpus.begin(), gpus.end(), [](const GpuDevice& g) { return !g.uuid.empty(); });
    if (!any_uuid)
      throw UsageError(where + " is a UUID, but this node's hwloc topology carries no GPU UUIDs (Debian's hwloc has "
                       "no NVML plugin): give GPU indexes (PCI bus id order) instead");
    int found = -1;
    for (const auto& g : gpus) {
      if (g.uuid.empty() || g.uuid.compare(0, entry.size(), entry) != 0) continue;  // CUDA accepts unique prefixes
      if (found != -1)
        throw UsageError(where + " is an ambiguous UUID prefix: it matches several GPUs; give more of the UUID");
      found = g.ordinal;
    }
    if (found == -1) throw UsageError(where + " matches no GPU UUID of this node");
    return found;
  }
  int index = -1;
  const auto [ptr, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), index);
  if (entry.empty() || ec != std::errc() || ptr != entry.data() + entry.size() || index < 0)
    throw UsageError(where + " is neither a GPU index (0, 1, ...) nor a GPU- UUID");
  if (index >= static_cast<int>(gpus.size())) throw UsageError(where + " is unknown: " + known_indexes(gpus));
  return index;
}

std::vector<std::pair<int, std::string>> resolve_list(const std::vector<GpuDevice>& gpus, const std::string& text,
                                                      const std::string& source) {
  std::vector<std::pair<int, std::string>> out;
  for (const auto& entry : split_commas(text)) {
    const int ordinal = resolve(gpus, entry, source);
    for (const auto& [seen, seen_entry] : out)
      if (seen == ordinal)
        throw UsageError("GPU '" + entry + "' in " + source + " is the same GPU as '" + seen_entry +
                         "'; list each GPU once");
    out.emplace_back(ordinal, entry);
  }
  return out;
}

}  // namespace

std::vector<GpuAssignment> select_gpus(const std::vector<GpuDevice>& gpus,
                                       const std::optional<std::string>& cuda_visible_devices,
                                       const std::string& gpus_option) {
  std::vector<std::pair<int, std::string>> chosen;
  std::optional<std::vector<std::pair<int, std::string>>> visible;
  if (cuda_visible_devices) {
    visible.emplace();
    if (!trim(*cuda_visible_devices).empty())
      *visible = resolve_list(gpus, *cuda_visible_devices, "CUDA_VISIBLE_DEVICES '" + *cuda_visible_devices + "'");
  }
  if (!gpus_option.empty()) {
    chosen = resolve_list(gpus, gpus_option, "--gpus '" + gpus_option + "'");
    if (visible) {
      for (const auto& [ordinal, entry] : chosen) {
        const bool given = std::any_of(visible->begin(), visible->end(), [&](const auto& v) { return v.first == ordinal; });
        if (!given)
          throw UsageError("GPU '" + entry + "' in --gpus '" + gpus_option + "' is not in this task's CUDA_VISIBLE_DEVICES '" +
                           *cuda_visible_devices + "'; choose among the GPUs the task was given");
      }
    }
  } else if (visible) {
    chosen = *visible;
  } else {
    for (const auto& g : gpus) chosen.emplace_back(g.ordinal, std::to_string(g.ordinal));
  }
  std::vector<GpuAssignment> out;
  for (const auto& [ordinal, entry] : chosen) {
    const GpuDevice& g = gpus[static_cast<std::size_t>(ordinal)];
    out.push_back(GpuAssignment{g.ordinal, g.pci_bus_id, g.uuid, entry});
  }
  return out;
}

}  // namespace hyrun::binding
