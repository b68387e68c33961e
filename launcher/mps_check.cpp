#include "launcher/mps_check.hpp"

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

std::optional<std::string> shared_gpu_without_mps(const std::vector<binding::RankPlacement>& ranks, int rank_offset,
                                                  const std::filesystem::path& pipe_dir) {
  std::map<std::string, std::vector<int>> by_gpu;  // PCI bus id -> global ranks
  for (const auto& r : ranks)
    for (const auto& g : r.gpus) by_gpu[g.pci_bus_id].push_back(rank_offset + r.local_rank);
  const std::vector<int>* shared = nullptr;
  std::string bus;
  for (const auto& [id, users] : by_gpu)
    if (users.size() > 1) {
      shared = &users;
      bus = id;
      break;
    }
  if (shared == nullptr) return std::nullopt;
  std::error_code ec;
  const auto control = pipe_dir / "control";
  if (std::filesystem::exists(control, ec)) return std::nullopt;
  return fmt::format(
      "ranks {} share the GPU at {} and no MPS daemon runs here (no {}): their kernels take turns on the GPU, and "
      "kernels that wait for each other's (EP dispatch and combine) then run 30 to 50 times slower (H100, 2 to 8 ranks); start one with "
      "'nvidia-cuda-mps-control -d' (same CUDA_MPS_PIPE_DIRECTORY), or give each rank its own GPU (docs/binding.md)",
      fmt::join(*shared, ","), bus, control.string());
}

}  // namespace hyrun
