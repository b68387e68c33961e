#pragma once
// Ranks that share a GPU without an MPS daemon take turns on it (time slices of about a
// millisecond), so kernels of one rank that wait for another rank's kernel (the EP
// dispatch and combine) wait a slice each time: measured on an H100 with 8 ranks, 24 ms
// per dispatch+combine instead of 0.5 ms under MPS. hyrun warns before the launch.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "hyrun/binding/binding_plan.hpp"

namespace hyrun {

/// The MPS pipe directory a CUDA client of this environment uses: CUDA_MPS_PIPE_DIRECTORY,
/// else /tmp/nvidia-mps (NVIDIA's default).
std::filesystem::path mps_pipe_directory();

/// The warning to print when two or more of `ranks` share a GPU and no MPS control daemon
/// has its pipe (`pipe_dir`/control) here; nullopt when no GPU is shared or MPS runs.
/// Global rank = rank_offset + local rank.
std::optional<std::string> shared_gpu_without_mps(const std::vector<binding::RankPlacement>& ranks, int rank_offset,
                                                  const std::filesystem::path& pipe_dir);

}  // namespace hyrun
