#include "hyrun/launcher/mps_check.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <map>
#include <system_error>

namespace hyrun {

std::filesystem::path mps_pipe_directory() {
  const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  return dir != nullptr && *dir != '\0' ? std::filesystem::path(dir) : std::filesystem::path("/tmp/nvidia-mps");
}

bool mps_daemon_answers(const std::filesystem::path& pipe_dir) {
  std::error_code ec;
  return std::filesystem::exists(pipe_dir / "control", ec);
}

std::optional<GpuSharing> first_shared_gpu(const std::vector<binding::RankPlacement>& ranks, int rank_offset) {
  std::map<std::string, std::vector<int>> by_gpu;  // PCI bus id -> global ranks
  for (const auto& r : ranks)
    for (const auto& g : r.gpus) by_gpu[g.pci_bus_id].push_back(rank_offset + r.local_rank);
  for (auto& [id, users] : by_gpu)
    if (users.size() > 1) return GpuSharing{id, std::move(users)};
  return std::nullopt;
}

std::string shared_gpu_warning(const GpuSharing& sharing, const std::filesystem::path& pipe_dir) {
  return fmt::format(
      "ranks {} share the GPU at {} and no MPS daemon runs here (no {}): their kernels take turns on the GPU, and "
      "kernels that wait for each other's (EP dispatch and combine) then run 30 to 50 times slower (H100, 2 to 8 "
      "ranks); start one with 'nvidia-cuda-mps-control -d' (same CUDA_MPS_PIPE_DIRECTORY), let hyrun start one "
      "(--mps), or give each rank its own GPU (docs/binding.md)",
      fmt::join(sharing.ranks, ","), sharing.pci_bus_id, (pipe_dir / "control").string());
}

std::optional<std::string> shared_gpu_without_mps(const std::vector<binding::RankPlacement>& ranks, int rank_offset,
                                                  const std::filesystem::path& pipe_dir) {
  const auto sharing = first_shared_gpu(ranks, rank_offset);
  if (!sharing || mps_daemon_answers(pipe_dir)) return std::nullopt;
  return shared_gpu_warning(*sharing, pipe_dir);
}

}  // namespace hyrun
