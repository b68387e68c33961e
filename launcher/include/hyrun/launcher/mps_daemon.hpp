#pragma once
// A private NVIDIA MPS control daemon for the ranks of one hyrun that share a GPU (see
// mps_check.hpp for why). `nvidia-cuda-mps-control -d` is started with its own pipe and
// log directory (a new one under TMPDIR), so it neither meets nor disturbs another daemon;
// the ranks get CUDA_MPS_PIPE_DIRECTORY / CUDA_MPS_LOG_DIRECTORY. The destructor quits it
// (after the ranks ended) and removes the directory.
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hyrun/process/private_directory.hpp"

namespace hyrun {

class MpsDaemon {
 public:
  /// Starts `control` (a path or a name in PATH) with `-d` and waits, within `timeout`,
  /// for its control pipe. Throws hyrun::Error naming what failed (the directory, the
  /// program, its exit status, the pipe that did not appear).
  static std::unique_ptr<MpsDaemon> start(const std::string& control, std::chrono::milliseconds timeout);
  ~MpsDaemon();
  MpsDaemon(const MpsDaemon&) = delete;
  MpsDaemon& operator=(const MpsDaemon&) = delete;

  const std::string& pipe_directory() const { return pipe_dir_; }
  /// The variables a CUDA client needs to find this daemon.
  std::vector<std::pair<std::string, std::string>> client_environment() const;

 private:
  MpsDaemon(std::string control, PrivateDirectory root);
  std::string control_;
  PrivateDirectory root_;  // pipe/ and log/ below it; removed after the daemon quit
  std::string pipe_dir_;
  std::string log_dir_;
};

/// The MPS control program hyrun would start: the first `nvidia-cuda-mps-control` in
/// PATH, or "" when there is none.
std::string find_mps_control();

}  // namespace hyrun
