#pragma once
// Ranks that share a GPU without an MPS daemon take turns on it (time slices of about a
// millisecond), so kernels of one rank that wait for another rank's kernel (the EP
// dispatch and combine) wait a slice each time: measured on an H100 with 8 ranks, 24 ms
// per dispatch+combine instead of 0.5 ms under MPS. hyrun starts a private daemon for
// such ranks (mps_daemon.hpp, `--mps`), or warns when it cannot.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "hyrun/binding/binding_plan.hpp"

namespace hyrun {

/// The MPS pipe directory a CUDA client of this environment uses: CUDA_MPS_PIPE_DIRECTORY,
/// else /tmp/nvidia-mps (NVIDIA's default).
std::filesystem::path mps_pipe_directory();

/// True when an MPS control daemon has its pipe (`pipe_dir`/control) here.
bool mps_daemon_answers(const std::filesystem::path& pipe_dir);

/// The first GPU (by PCI bus id) that two or more of `ranks` share, with their global
/// ranks (rank_offset + local rank); nullopt when no GPU is shared.
struct GpuSharing {
  std::string pci_bus_id;
  std::vector<int> ranks;
};
std::optional<GpuSharing> first_shared_gpu(const std::vector<binding::RankPlacement>& ranks, int rank_offset);

/// What to tell the user when `sharing` runs without a daemon at `pipe_dir`.
std::string shared_gpu_warning(const GpuSharing& sharing, const std::filesystem::path& pipe_dir);

/// The warning to print when two or more of `ranks` share a GPU and no MPS control daemon
/// has its pipe at `pipe_dir`; nullopt when no GPU is shared or MPS runs.
std::optional<std::string> shared_gpu_without_mps(const std::vector<binding::RankPlacement>& ranks, int rank_offset,
                                                  const std::filesystem::path& pipe_dir);

}  // namespace hyrun
