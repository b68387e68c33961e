#include "hyrun/binding/gpu_visibility.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hyrun/binding/cpu_list.hpp"
#include "hyrun/common/error.hpp"

namespace hyrun::binding {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// "Device Minor: 0" and "Bus Location: 0000:18:00.0" of one information file.
bool read_information(const std::filesystem::path& file, DriverGpu& gpu) {
  std::ifstream in(file);
  if (!in) return false;
  bool minor = false, bus = false;
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon));
    const std::string value = trim(line.substr(colon + 1));
    if (key == "Device Minor") {
      const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), gpu.minor);
      minor = ec == std::errc{} && ptr == value.data() + value.size() && gpu.minor >= 0;
    } else if (key == "Bus Location") {
      gpu.pci_bus_id = lower(value);
      bus = !value.empty();
    }
  }
  return minor && bus;
}

bool opens_read_write(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

}  // namespace

TaskGpuView read_task_gpu_view(const SystemRoots& roots) {
  TaskGpuView view;
  const std::filesystem::path dir = std::filesystem::path(roots.proc) / "driver/nvidia/gpus";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    DriverGpu gpu;
    if (!read_information(entry.path() / "information", gpu)) continue;
    gpu.openable = opens_read_write(roots.dev + "/nvidia" + std::to_string(gpu.minor));
    view.driver_gpus.push_back(gpu);
  }
  std::sort(view.driver_gpus.begin(), view.driver_gpus.end(),
            [](const DriverGpu& a, const DriverGpu& b) { return a.minor < b.minor; });
  std::vector<int> all, open;
  for (const auto& g : view.driver_gpus) {
    all.push_back(g.minor);
    if (g.openable) open.push_back(g.minor);
  }
  view.constrained = open.size() < all.size();
  if (view.constrained) {
    std::vector<std::string> bus_ids;
    for (const auto& g : view.driver_gpus)
      if (g.openable) bus_ids.push_back(g.pci_bus_id);
    std::sort(bus_ids.begin(), bus_ids.end());  // CUDA_DEVICE_ORDER=PCI_BUS_ID
    view.visible_bus_ids = std::move(bus_ids);
    view.evidence = fmt::format("device cgroup: of the driver's GPUs (minors {}) only {} can be opened",
                                format_cpu_list(all), open.empty() ? "none" : "minors " + format_cpu_list(open));
  }
  return view;
}

std::vector<int> cuda_view_ordinals(const TaskGpuView& view, const std::vector<GpuDevice>& gpus) {
  std::vector<int> out;
  if (!view.constrained) {
    for (const auto& g : gpus) out.push_back(g.ordinal);
    return out;
  }
  for (const auto& bus : view.visible_bus_ids) {
    const auto it =
        std::find_if(gpus.begin(), gpus.end(), [&](const GpuDevice& g) { return lower(g.pci_bus_id) == bus; });
    if (it == gpus.end())
      throw Error(
          fmt::format("binding: the NVIDIA driver reports a GPU at PCI {} that this task may open, but hwloc's "
                      "topology has no GPU there",
                      bus));
    out.push_back(it->ordinal);
  }
  return out;
}

std::vector<int> ordinals_of_minors(const std::string& list, const std::string& source, const TaskGpuView& view,
                                    const std::vector<GpuDevice>& gpus) {
  const auto minors = parse_cpu_list(list, source);
  std::vector<int> out;
  for (int minor : minors) {
    const auto d = std::find_if(view.driver_gpus.begin(), view.driver_gpus.end(),
                                [&](const DriverGpu& g) { return g.minor == minor; });
    if (d == view.driver_gpus.end()) return {};
    const auto it = std::find_if(gpus.begin(), gpus.end(),
                                 [&](const GpuDevice& g) { return lower(g.pci_bus_id) == d->pci_bus_id; });
    if (it == gpus.end()) return {};
    out.push_back(it->ordinal);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace hyrun::binding
