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

std::string known_indexes(const std::vector<GpuDevice>& gpus, const std::vector<int>* view) {
  if (view && view->size() != gpus.size()) {
    if (view->empty()) return "this task can open none of the node's " + std::to_string(gpus.size()) + " GPU(s)";
    return "this task can open " + std::to_string(view->size()) + " of the node's " + std::to_string(gpus.size()) +
           " GPUs (a device cgroup), which CUDA numbers 0-" + std::to_string(view->size() - 1) + " in PCI bus id order";
  }
  if (gpus.empty()) return "this node has no GPU";
  return "this node has " + std::to_string(gpus.size()) + " GPU(s), indexes 0-" + std::to_string(gpus.size() - 1) +
         " in PCI bus id order";
}

// Resolves one entry to an ordinal; `source` names where it came from for messages.
int resolve(const std::vector<GpuDevice>& gpus, const std::string& entry, const std::string& source,
            const std::vector<int>* view) {
  const std::string where = "GPU '" + entry + "' in " + source;
  if (entry.rfind("MIG-", 0) == 0)
    throw UsageError(where +
                     " is a MIG instance; MIG is not supported by hyrun's GPU binding: give whole GPUs as "
                     "indexes or GPU- UUIDs");
  if (entry.rfind("GPU-", 0) == 0) {
    const bool any_uuid = std::any_of(gpus.begin(), gpus.end(), [](const GpuDevice& g) { return !g.uuid.empty(); });
    if (!any_uuid)
      throw UsageError(where +
                       " is a UUID, but this node's hwloc topology carries no GPU UUIDs (Debian's hwloc has "
                       "no NVML plugin): give GPU indexes (PCI bus id order) instead");
    int found = -1;
    for (const auto& g : gpus) {
      if (g.uuid.empty() || g.uuid.compare(0, entry.size(), entry) != 0) continue;  // CUDA accepts unique prefixes
      if (found != -1)
        throw UsageError(where + " is an ambiguous UUID prefix: it matches several GPUs; give more of the UUID");
      found = g.ordinal;
    }
    if (found == -1) throw UsageError(where + " matches no GPU UUID of this node");
    if (view && std::find(view->begin(), view->end(), found) == view->end())
      throw UsageError(
          where + " is a GPU of this node that this task cannot open (a device cgroup): " + known_indexes(gpus, view));
    return found;
  }
  int index = -1;
  const auto [ptr, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), index);
  if (entry.empty() || ec != std::errc() || ptr != entry.data() + entry.size() || index < 0)
    throw UsageError(where + " is neither a GPU index (0, 1, ...) nor a GPU- UUID");
  const int count = static_cast<int>(view ? view->size() : gpus.size());
  if (index >= count) throw UsageError(where + " is unknown: " + known_indexes(gpus, view));
  return view ? (*view)[static_cast<std::size_t>(index)] : index;
}

std::vector<std::pair<int, std::string>> resolve_list(const std::vector<GpuDevice>& gpus, const std::string& text,
                                                      const std::string& source, const std::vector<int>* view) {
  std::vector<std::pair<int, std::string>> out;
  for (const auto& entry : split_commas(text)) {
    const int ordinal = resolve(gpus, entry, source, view);
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
                                       const std::string& gpus_option, const std::vector<int>* cuda_view,
                                       const std::string& visible_source) {
  std::vector<std::pair<int, std::string>> chosen;
  std::optional<std::vector<std::pair<int, std::string>>> visible;
  if (cuda_visible_devices) {
    visible.emplace();
    if (!trim(*cuda_visible_devices).empty())
      *visible =
          resolve_list(gpus, *cuda_visible_devices, visible_source + " '" + *cuda_visible_devices + "'", cuda_view);
  }
  if (!gpus_option.empty()) {
    chosen = resolve_list(gpus, gpus_option, "--gpus '" + gpus_option + "'", cuda_view);
    if (visible) {
      for (const auto& [ordinal, entry] : chosen) {
        const bool given =
            std::any_of(visible->begin(), visible->end(), [&](const auto& v) { return v.first == ordinal; });
        if (!given)
          throw UsageError("GPU '" + entry + "' in --gpus '" + gpus_option + "' is not in this task's " +
                           visible_source + " '" + *cuda_visible_devices +
                           "'; choose among the GPUs the task was given");
      }
    }
  } else if (visible) {
    chosen = *visible;
  } else if (cuda_view) {
    // The rank's CUDA numbers the same view: position i there is device i.
    for (std::size_t i = 0; i < cuda_view->size(); ++i) chosen.emplace_back((*cuda_view)[i], std::to_string(i));
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
