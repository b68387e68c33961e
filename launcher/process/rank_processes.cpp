#include "hyrun/process/rank_processes.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "hyrun/common/env_contract.hpp"
#include "hyrun/process/child_process.hpp"
#include "hyrun/process/job_events.hpp"
#include "hyrun/process/open_file_limit.hpp"

namespace hyrun {

RankProcesses::RankProcesses(std::vector<std::string> command, bool label, bool timestamp_output,
                             std::string output_filename)
    : command_(std::move(command)), output_(label, timestamp_output, std::move(output_filename)) {
  // A stalled reader of stderr must not block the loop: the launcher's lines queue with the ranks'.
  job_event_sink() = [this](const std::string& line) { output_.write_own_line(line); };
}

RankProcesses::~RankProcesses() {
  // Normally the owner has reaped everything; on an exception path this guarantees that no
  // rank, no member of a rank's group and no zombie outlives the launcher. Nothing may
  // escape a destructor that runs while an exception unwinds.
  try {
    kill_all_groups();
  } catch (const std::exception& e) {
    spdlog::error("could not kill the ranks' process groups at hyrun's end: {}", e.what());
  }
  for (auto& process : processes_)
    if (process.alive()) {
      int status;
      while (waitpid(process.pid, &status, 0) < 0 && errno == EINTR) {
      }
      process.state = ProcessState::kEnded;
    }
  try {
    reap();
  } catch (const std::exception& e) {
    spdlog::error("could not reap every child at hyrun's end: {}", e.what());
  }
  // Lines still queued (a slow reader) get a last chance; then lines go to stdio again.
  job_event_sink() = nullptr;
}

int RankProcesses::running_count() const {
  return static_cast<int>(
      std::count_if(processes_.begin(), processes_.end(), [](const RankProcess& p) { return p.alive(); }));
}

const RankProcess* RankProcesses::latest(int global_rank) const {
  const auto it = std::find_if(processes_.rbegin(), processes_.rend(),
                               [&](const RankProcess& p) { return p.global_rank == global_rank; });
  return it == processes_.rend() ? nullptr : &*it;
}

RankProcess* RankProcesses::latest(int global_rank) {
  return const_cast<RankProcess*>(std::as_const(*this).latest(global_rank));
}

std::size_t RankProcesses::start(RankLaunch launch) {
  SpawnSpec spec;
  spec.open_file_soft_limit = original_open_file_soft_limit();
  spec.argv = command_;
  spec.environment = std::move(launch.environment);
  spec.own_pid_variable = launch.own_pid_variable;
  spec.pre_exec = std::move(launch.pre_exec);
  // Like mpirun's --stdin default, only rank 0 reads hyrun's stdin; the others get /dev/null.
  spec.stdin_fd = launch.global_rank == 0 && launch.incarnation == 0 ? input_.rank0_stdin() : -1;
  UniqueFd out = output_.add(launch.global_rank, 1);
  UniqueFd err = output_.add(launch.global_rank, 2);
  spec.stdout_fd = out.get();
  spec.stderr_fd = err.get();
  UniqueFd publish_write;
  if (launch.publishes_address) {
    publish_write = publish_.open();
    spec.inherited_fds.emplace_back(publish_write.get(), kPublishFd);
    spec.environment.push_back(fmt::format("{}={}", env::kPublishFd, kPublishFd));
  }
  ControlChannel control;
  UniqueFd control_child = control.open();
  spec.inherited_fds.emplace_back(control_child.get(), kControlFd);
  spec.environment.push_back(fmt::format("{}={}", env::kControlFd, kControlFd));
  for (const auto& [fd, number] : launch.inherited_fds) spec.inherited_fds.emplace_back(fd->get(), number);
  const pid_t pid = spawn(spec);
  spdlog::debug("started rank {} (local rank {}) as pid {}", launch.global_rank, launch.local_rank, pid);
  if (launch.global_rank == 0) input_.started();
  RankProcess process;
  process.global_rank = launch.global_rank;
  process.local_rank = launch.local_rank;
  process.pid = pid;
  process.group = ProcessGroup(pid);
  process.incarnation = launch.incarnation;
  process.control = std::move(control);
  processes_.push_back(std::move(process));
  return processes_.size() - 1;
}

std::vector<ProcessEvent> RankProcesses::reap() {
  std::vector<ProcessEvent> events;
  for (;;) {
    int status = 0;
    // Stops and continues too: a stopped rank must not hold the job unnoticed.
    const pid_t pid = waitpid(-1, &status, WNOHANG | WUNTRACED | WCONTINUED);
    if (pid <= 0) break;  // 0: none ready; -1/ECHILD: no children at all
    const auto it = std::find_if(processes_.begin(), processes_.end(),
                                 [pid](const RankProcess& p) { return p.alive() && p.pid == pid; });
    const std::size_t index = static_cast<std::size_t>(it - processes_.begin());
    if (WIFSTOPPED(status)) {
      if (it == processes_.end()) continue;
      it->state = ProcessState::kSuspended;
      events.push_back({index, ProcessEvent::Kind::kStopped, WSTOPSIG(status)});
    } else if (WIFCONTINUED(status)) {
      if (it == processes_.end()) continue;
      it->state = ProcessState::kRunning;
      spdlog::info("rank {} (pid {}) continues", it->global_rank, it->pid);
    } else if (it != processes_.end()) {
      it->group.on_leader_reaped();
      if (it->global_rank == 0) input_.close();
      events.push_back({index, ProcessEvent::Kind::kEnded, status});
    } else {
      // An orphaned descendant adopted as subreaper; a group it was the last of must not be
      // signalled by number any more.
      for (auto& process : processes_) process.group.recheck();
    }
  }
  return events;
}

void RankProcesses::record_end(std::size_t process, int wait_status) {
  RankProcess& p = processes_.at(process);
  p.state = ProcessState::kEnded;
  p.end.wait_status = wait_status;
  spdlog::debug("rank {} (pid {}) {}", p.global_rank, p.pid, p.end.describe());
}

void RankProcesses::signal_running(int signal) {
  const bool ends = signal != SIGUSR1 && signal != SIGUSR2;
  for (auto& process : processes_)
    if (process.alive()) {
      process.group.signal(signal);
      // A stopped rank acts on the signal only once continued (as Slurm does, SIGCONT follows).
      if (ends) process.group.signal(SIGCONT);
    }
}

void RankProcesses::kill_all_groups() {
  // Also groups whose leader exited: their members (a rank's own children) go too. Only
  // groups known to be still ours are signalled (ProcessGroup): never a reused number.
  for (auto& process : processes_) process.group.signal(SIGKILL);
}

void RankProcesses::add_poll_fds(std::vector<pollfd>& fds) {
  output_.add_poll_fds(fds);
  input_.add_poll_fds(fds);
}

bool RankProcesses::on_poll(const pollfd& p) { return output_.on_poll(p) || input_.on_poll(p); }

}  // namespace hyrun
