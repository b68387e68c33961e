#include "hyrun/launcher/mps_daemon.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

#include "hyrun/common/error.hpp"
#include "hyrun/process/child_process.hpp"
#include "hyrun/process/unique_fd.hpp"
#include "hyrun/process/wait_status.hpp"

extern char** environ;

namespace hyrun {
namespace {

std::vector<std::string> environment_with(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    bool replaced = false;
    for (const auto& [k, v] : extra) replaced = replaced || entry.starts_with(k + "=");
    if (!replaced) env.push_back(entry);
  }
  for (const auto& [k, v] : extra) env.push_back(k + "=" + v);
  return env;
}

/// Waits for `pid` within `timeout`; SIGKILLs and reaps it after. Returns its wait status,
/// or -1 when it had to be killed.
int wait_bounded(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return -1;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

std::string find_mps_control() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    const auto candidate = std::filesystem::path(dir) / "nvidia-cuda-mps-control";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

MpsDaemon::MpsDaemon(std::string control, PrivateDirectory root)
    : control_(std::move(control)),
      root_(std::move(root)),
      pipe_dir_(root_.path() + "/pipe"),
      log_dir_(root_.path() + "/log") {}

std::vector<std::pair<std::string, std::string>> MpsDaemon::client_environment() const {
  return {{"CUDA_MPS_PIPE_DIRECTORY", pipe_dir_}, {"CUDA_MPS_LOG_DIRECTORY", log_dir_}};
}

std::unique_ptr<MpsDaemon> MpsDaemon::start(const std::string& control, std::chrono::milliseconds timeout) {
  PrivateDirectory root;
  try {
    root = PrivateDirectory::create(PrivateDirectory::temporary_root(), "hyrun-mps");
  } catch (const SystemError& e) {
    throw Error(fmt::format("MPS daemon: {}", e.what()));
  }
  // Owned from here: the directory goes on every path below.
  std::unique_ptr<MpsDaemon> d(new MpsDaemon(control, std::move(root)));
  std::filesystem::create_directories(d->pipe_dir_);
  std::filesystem::create_directories(d->log_dir_);
  SpawnSpec spec;
  spec.argv = {control, "-d"};
  spec.environment = environment_with(d->client_environment());
  const pid_t pid = spawn(spec);  // SpawnError (127/126) names the program
  const int status = wait_bounded(pid, timeout);
  if (status != 0)
    throw Error(fmt::format(
        "MPS daemon: '{} -d' {}", control,
        status < 0 ? fmt::format("did not return within {} ms", timeout.count()) : ProcessEnd{status}.describe()));
  const auto pipe = std::filesystem::path(d->pipe_dir_) / "control";
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::error_code ec;
  while (!std::filesystem::exists(pipe, ec)) {
    if (std::chrono::steady_clock::now() > deadline)
      throw Error(
          fmt::format("MPS daemon: '{} -d' returned, but its control pipe {} did not appear within {} ms "
                      "(its log: {})",
                      control, pipe.string(), timeout.count(), d->log_dir_));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return d;
}

MpsDaemon::~MpsDaemon() {
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::path(pipe_dir_) / "control", ec)) {
    try {
      int fds[2];
      if (::pipe2(fds, O_CLOEXEC) != 0) throw SystemError("pipe2", errno);
      UniqueFd read_end(fds[0]), write_end(fds[1]);
      SpawnSpec spec;
      spec.argv = {control_};  // commands come on stdin
      spec.environment = environment_with(client_environment());
      spec.stdin_fd = read_end.get();
      spec.stdout_fd = 2;  // its replies are not the ranks' output
      const pid_t pid = spawn(spec);
      read_end.reset();
      static constexpr char kQuit[] = "quit\n";
      [[maybe_unused]] const ssize_t n = ::write(write_end.get(), kQuit, sizeof kQuit - 1);
      write_end.reset();
      if (wait_bounded(pid, std::chrono::seconds(5)) != 0)
        spdlog::warn("MPS daemon ({}): 'quit' did not end cleanly; it may still run", pipe_dir_);
    } catch (const std::exception& e) {
      spdlog::warn("MPS daemon ({}): could not be told to quit: {}", pipe_dir_, e.what());
    }
  }
}

}  // namespace hyrun
