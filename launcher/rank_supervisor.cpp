#include "hyrun/launcher/rank_supervisor.hpp"

#include "hyrun/common/start_rank_request.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>
#include <variant>

#include "hyrun/common/death_notice.hpp"
#include "hyrun/common/env_contract.hpp"
#include "hyrun/process/job_events.hpp"
#include "hyrun/process/open_file_limit.hpp"

namespace hyrun {

using Clock = std::chrono::steady_clock;

namespace {
constexpr auto kExitGrace = std::chrono::seconds(1);            // rank 0 closed its fd: wait this long for its status
constexpr auto kDrainLimit = std::chrono::seconds(2);           // output of killed process groups
constexpr auto kSignalSettle = std::chrono::milliseconds(250);  // see RankState::kEndPending

// The signals of a stop or a cancel (hyrun's own, scancel's, a PMIx abort's): a rank ended by
// one is judged only after kSignalSettle (RankState::kEndPending).
bool killed_by_terminating_signal(int wait_status) {
  if (!WIFSIGNALED(wait_status)) return false;
  const int sig = WTERMSIG(wait_status);
  return sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGKILL;
}
// A rank 0 that has not loaded the worker library this long after its start most likely
// never will (the library says hello before main): hyrun says so instead of waiting silently.
constexpr auto kHelloWait = std::chrono::seconds(3);
}  // namespace

RankSupervisor::RankSupervisor(SupervisorOptions options, SignalEvents& signals)
    : options_(std::move(options)),
      signals_(signals),
      output_(options_.label, options_.timestamp_output, options_.output_filename) {
  // hyrun's own lines go through the same non-blocking stderr queue as the ranks' lines.
  job_event_sink() = [this](const std::string& line) { output_.write_own_line(line); };
}

RankSupervisor::~RankSupervisor() {
  // Normally finish() has reaped everything; on an exception path this guarantees that
  // no rank, no member of a rank's group and no zombie outlives hyrun. Nothing may escape
  // a destructor that runs while an exception unwinds: a failure here is said and the
  // teardown goes on as far as it can.
  try {
    stopping_ = true;  // a rank reaped now is never restarted
    kill_all_groups();
  } catch (const std::exception& e) {
    spdlog::error("could not kill the ranks' process groups at hyrun's end: {}", e.what());
  }
  for (auto& rank : ranks_)
    if (rank.alive()) {
      int status;
      while (waitpid(rank.pid, &status, 0) < 0 && errno == EINTR) {
      }
      rank.state = RankState::kEnded;
    }
  try {
    reap_children();
  } catch (const std::exception& e) {
    spdlog::error("could not reap every child at hyrun's end: {}", e.what());
  }
  // Lines still queued (a slow reader) get a last chance; then lines go to stdio again.
  job_event_sink() = nullptr;
}

int RankSupervisor::running_count() const {
  return static_cast<int>(std::count_if(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.alive(); }));
}

void RankSupervisor::start(RankLaunch launch) {
  // Starting many ranks takes a while outside the loop: a stop signal is honoured here too,
  // and nothing new starts once the job is stopping.
  if (signals_.pending_stop()) on_signals();
  if (stopping_) return;
  const int global_rank = launch.global_rank;
  try {
    start_process(std::move(launch));
  } catch (const SpawnError& e) {
    if (e.errnum() != EMFILE && e.errnum() != ENFILE) throw;
    throw Error(describe_fd_exhaustion(global_rank), exit_code::kLauncherError);
  } catch (const SystemError& e) {
    if (e.errnum() != EMFILE && e.errnum() != ENFILE) throw;
    job_exit_code_ = job_exit_code_.value_or(exit_code::kLauncherError);
    throw Error(describe_fd_exhaustion(global_rank), exit_code::kLauncherError);
  }
}

void RankSupervisor::start_process(RankLaunch launch) {
  SpawnSpec spec;
  spec.open_file_soft_limit = original_open_file_soft_limit();
  spec.argv = options_.command;
  spec.environment = std::move(launch.environment);
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
  pid_t pid;
  try {
    pid = spawn(spec);
  } catch (const SpawnError& e) {
    job_exit_code_ = job_exit_code_.value_or(e.exit_code());
    if (running_count() > 0) stop(SIGTERM, e.exit_code());
    throw;
  }
  spdlog::debug("started rank {} (local rank {}) as pid {}", launch.global_rank, launch.local_rank, pid);
  if (launch.global_rank == 0) input_.started();
  Rank rank;
  rank.global_rank = launch.global_rank;
  rank.local_rank = launch.local_rank;
  rank.pid = pid;
  rank.group = ProcessGroup(pid);
  rank.incarnation = launch.incarnation;
  rank.control = std::move(control);
  ranks_.push_back(std::move(rank));
}

void RankSupervisor::poll_once(Clock::time_point deadline) {
  std::vector<pollfd> fds;
  fds.push_back({signals_.fd(), POLLIN, 0});
  if (publish_.fd() >= 0) fds.push_back({publish_.fd(), POLLIN, 0});
  output_.add_poll_fds(fds);
  input_.add_poll_fds(fds);
  for (const auto& rank : ranks_)
    if (rank.control) fds.push_back({rank.control.fd(), POLLIN, 0});
  for (auto* participant : participants_) participant->add_poll_fds(fds);

  auto until = deadline;
  for (const auto* participant : participants_) until = std::min(until, participant->wake_by());
  if (stopping_ && !killed_) until = std::min(until, kill_deadline_);
  if (const Rank* pending = pending_verdict()) until = std::min(until, pending->verdict_due);
  const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
  const int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<long long>(wait_ms, 0, 1000)));
  if (n < 0 && errno != EINTR) throw SystemError("poll", errno);
  for (const auto& p : fds) {
    if (!p.revents) continue;
    if (output_.on_poll(p) || input_.on_poll(p)) continue;
    if (std::any_of(participants_.begin(), participants_.end(), [&p](PollParticipant* q) { return q->on_poll(p); }))
      continue;
    if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
    if (p.fd == signals_.fd())
      on_signals();
    else if (publish_.fd() >= 0 && p.fd == publish_.fd())
      on_publish_readable();
    else if (auto it =
                 std::find_if(ranks_.begin(), ranks_.end(), [&](const Rank& r) { return r.control.fd() == p.fd; });
             it != ranks_.end())
      on_control_readable(*it);
  }
  start_requested_ranks();
  for (auto* participant : participants_) participant->on_tick();
  if (Rank* pending = pending_verdict(); pending && Clock::now() >= pending->verdict_due) settle_verdict(*pending);
  if (stopping_ && !killed_ && Clock::now() >= kill_deadline_) {
    const int left = running_count();
    if (left > 0)
      job_event("{} rank(s) still running {} s after they were asked to stop; sending SIGKILL", left,
                std::chrono::duration_cast<std::chrono::seconds>(options_.grace_period).count());
    kill_all_groups();
    killed_ = true;
  }
}

void RankSupervisor::on_signals() {
  for (int sig : signals_.drain()) {
    switch (sig) {
      case SIGCHLD: reap_children(); break;
      case SIGUSR1:
      case SIGUSR2: signal_running(sig); break;
      case SIGINT:
        if (++interrupts_ >= 2 && !killed_) {
          job_event("second SIGINT: killing {} rank(s) now", running_count());
          kill_all_groups();
          killed_ = true;
          break;
        }
        [[fallthrough]];
      default:  // SIGTERM, SIGHUP
        if (!stopping_)
          job_event("received {}; forwarding it to {} rank(s), SIGKILL follows in {} s", signal_name(sig),
                    running_count(), std::chrono::duration_cast<std::chrono::seconds>(options_.grace_period).count());
        if (!job_exit_code_) job_exit_code_ = 128 + sig;
        if (!stop_signal_) stop_signal_ = sig;
        signal_running(sig);
        if (!stopping_) {
          stopping_ = true;
          kill_deadline_ = Clock::now() + options_.grace_period;
        }
    }
  }
}

void RankSupervisor::reap_children() {
  // Ends reaped in one batch are judged after the loop, those of ranks killed by a
  // terminating signal first: waitpid returns zombies oldest child first, not in the order
  // they died, and a rank killed from outside must not lose to its own fallout (a peer
  // exiting 1 because it died) just because hyrun was not scheduled in between.
  std::vector<std::pair<pid_t, int>> ended;
  for (;;) {
    int status = 0;
    // Stops and continues too: a stopped rank must not hold the job unnoticed.
    const pid_t pid = waitpid(-1, &status, WNOHANG | WUNTRACED | WCONTINUED);
    if (pid <= 0) break;  // 0: none ready; -1/ECHILD: no children at all
    auto it = std::find_if(ranks_.begin(), ranks_.end(), [pid](const Rank& r) { return r.alive() && r.pid == pid; });
    if (WIFSTOPPED(status)) {
      if (it != ranks_.end()) {
        it->state = RankState::kSuspended;
        on_rank_stopped(*it, WSTOPSIG(status));
      }
      continue;
    }
    if (WIFCONTINUED(status)) {
      if (it != ranks_.end()) {
        it->state = RankState::kRunning;
        spdlog::info("rank {} (pid {}) continues", it->global_rank, it->pid);
      }
      continue;
    }
    if (it != ranks_.end()) {
      it->group.on_leader_reaped();
      if (it->global_rank == 0) input_.close();
      ended.emplace_back(pid, status);
      continue;
    }
    // Other pids are ranks' orphaned descendants that hyrun adopted as subreaper; a group
    // they were the last of must not be signalled by number any more.
    for (auto& rank : ranks_) rank.group.recheck();
  }
  std::stable_partition(ended.begin(), ended.end(),
                        [](const auto& e) { return killed_by_terminating_signal(e.second); });
  for (const auto& [pid, status] : ended) {
    // Looked up each time: on_rank_exit may restart a rank, which grows ranks_.
    auto it = std::find_if(ranks_.begin(), ranks_.end(), [pid](const Rank& r) { return r.alive() && r.pid == pid; });
    if (it != ranks_.end()) on_rank_exit(*it, status);
  }
}

void RankSupervisor::on_control_readable(Rank& rank) {
  for (auto& message : rank.control.receive()) {
    if (std::holds_alternative<control::HandlesDeaths>(message)) {
      on_handles_deaths(rank);
    } else if (const auto* start = std::get_if<control::StartRank>(&message)) {
      if (rank.global_rank != 0)
        spdlog::warn("rank {} asked to start rank {}, which only rank 0 may; ignored", rank.global_rank,
                     start->global_rank);
      else
        requested_starts_.push_back(start->global_rank);  // started after the poll round: starting grows ranks_
    } else if (const auto* planned = std::get_if<PlannedExit>(&message)) {
      rank.planned = *planned;  // a later announcement replaces an earlier one
      spdlog::info("rank {} (pid {}) announced a planned {}{}", rank.global_rank, rank.pid, planned->describe(),
                   planned->respawn ? "; it will be restarted" : "");
    } else {
      spdlog::warn("rank {} sent an unknown control message '{:.60}'; ignored", rank.global_rank,
                   std::get<control::Unknown>(message).text);
    }
  }
}

bool RankSupervisor::every_rank_handles_deaths() const {
  return !ranks_.empty() && std::all_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.handles_deaths; });
}

void RankSupervisor::tell_death(int dead) {
  for (auto& rank : ranks_)
    if (rank.alive() && rank.handles_deaths && rank.control && rank.global_rank != dead)
      rank.control.tell_death(rank.global_rank, dead);
}

void RankSupervisor::on_handles_deaths(Rank& rank) {
  if (rank.handles_deaths) return;
  rank.handles_deaths = true;
  spdlog::debug("rank {} (pid {}) handles peers' deaths", rank.global_rank, rank.pid);
  // Deaths before it asked: local ranks whose latest process has ended, and lost nodes' ranks.
  std::vector<int> dead = remote_dead_;
  for (const auto& other : ranks_) {
    const auto latest =
        std::find_if(ranks_.rbegin(), ranks_.rend(), [&](const Rank& r) { return r.global_rank == other.global_rank; });
    if (&*latest == &other && !other.alive()) dead.push_back(other.global_rank);
  }
  for (int d : dead) rank.control.tell_death(rank.global_rank, d);
}

void RankSupervisor::report_remote_deaths(int first, int count) {
  for (int r = first; r < first + count; ++r) {
    remote_dead_.push_back(r);
    tell_death(r);
  }
}

void RankSupervisor::respawn(int local_rank, int global_rank, int incarnation) {
  if (!relauncher_ || global_rank == 0) {
    spdlog::warn(
        "rank {} asked to be restarted, which {}; not restarted", global_rank,
        global_rank == 0 ? "rank 0 cannot be (it publishes the job's address)" : "this launch does not support");
    return;
  }
  RankLaunch launch = relauncher_(local_rank, incarnation + 1);
  launch.incarnation = incarnation + 1;
  spdlog::info("restarting rank {} (incarnation {})", global_rank, launch.incarnation);
  start(std::move(launch));
}

void RankSupervisor::start_requested_ranks() {
  auto asked = std::exchange(requested_starts_, {});
  for (int global_rank : asked) {
    if (stopping_) return;
    const auto processes =
        std::count_if(ranks_.begin(), ranks_.end(), [&](const Rank& r) { return r.global_rank == global_rank; });
    if (std::any_of(ranks_.begin(), ranks_.end(),
                    [&](const Rank& r) { return r.global_rank == global_rank && r.alive(); })) {
      spdlog::warn("rank 0 asked to start rank {}, which is running; ignored", global_rank);
      continue;
    }
    RankLaunch launch;
    try {
      if (!starter_) throw Error("this launch starts no rank on request");
      launch = starter_(global_rank, static_cast<int>(processes));
    } catch (const Error& e) {
      spdlog::warn("rank 0 asked to start rank {}: refused: {}", global_rank, e.what());
      continue;
    }
    spdlog::info("starting rank {} on rank 0's request (process {} of the rank)", global_rank, processes + 1);
    start(std::move(launch));
  }
}

void RankSupervisor::on_rank_exit(Rank& rank, int wait_status) {
  rank.state = RankState::kEnded;
  rank.end.wait_status = wait_status;
  spdlog::debug("rank {} (pid {}) {}", rank.global_rank, rank.pid, rank.end.describe());
  // A message sent just before death is still in the socket: read it before judging.
  if (rank.control) on_control_readable(rank);
  // The survivors that handle deaths learn of it now, whatever the verdict below (before a
  // restart, so that the notice always precedes the new process's join).
  tell_death(rank.global_rank);
  if (rank.planned && rank.planned->matches(wait_status)) {
    spdlog::info("rank {} (pid {}) {}, as it announced", rank.global_rank, rank.pid, rank.end.describe());
    if (!rank.planned->respawn || stopping_) return;
    if (rank.incarnation >= options_.max_restarts) {
      // A rank that asks for restarts without end (a bug, or a plan gone wrong) must not
      // spin forever: the request over the budget is the job's failure.
      report_failure(rank,
                     fmt::format("{} and asked to be restarted once more, over --max-restarts {} (restarted {} times)",
                                 rank.end.describe(), options_.max_restarts, rank.incarnation),
                     rank.end.failed() ? rank.end.exit_code() : exit_code::kLauncherError);
      return;
    }
    respawn(rank.local_rank, rank.global_rank, rank.incarnation);  // grows ranks_: `rank` is not used after this
    return;
  }
  if (awaiting_address_ && rank.global_rank == 0) return;  // await_root_address reports it
  if (!rank.end.failed() || job_exit_code_ || pending_verdict()) return;
  // SIGKILL too: a step cancel or a PMIx abort from another node kills hyrun and its ranks
  // together, and hyrun must not name a rank of that kill as the job's failure.
  if (killed_by_terminating_signal(wait_status)) {
    rank.state = RankState::kEndPending;
    rank.verdict_due = Clock::now() + kSignalSettle;
    return;
  }
  std::string how = describe_end(rank);
  if (WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGPIPE && (output_.broken(1) || output_.broken(2)))
    how += fmt::format(" after the reader of hyrun's {} went away", output_.broken(1) ? "stdout" : "stderr");
  report_failure(rank, how);
}

void RankSupervisor::on_rank_stopped(Rank& rank, int signal) {
  if (signal == SIGTTIN || signal == SIGTTOU) {
    // Stopped for using the terminal from its own (background) process group: nothing
    // will ever continue it, so this is a failure, not a pause.
    if (job_exit_code_ || stopping_) return;  // stop() continues it with the signal
    job_exit_code_ = 128 + signal;
    report_failure(rank, fmt::format("was stopped by signal {} ({}) for using the terminal, which ranks cannot", signal,
                                     signal_name(signal)));
    return;
  }
  job_event("rank {} (pid {}) was stopped by signal {} ({}); the job waits until it continues (SIGCONT)",
            rank.global_rank, rank.pid, signal, signal_name(signal));
}

RankSupervisor::Rank* RankSupervisor::pending_verdict() {
  const auto it =
      std::find_if(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.state == RankState::kEndPending; });
  return it == ranks_.end() ? nullptr : &*it;
}

void RankSupervisor::settle_verdict(Rank& rank) {
  rank.state = RankState::kEnded;
  if (!job_exit_code_) report_failure(rank, describe_end(rank));  // no signal reached hyrun: a real failure
}

std::string RankSupervisor::describe_end(const Rank& rank) {
  // An announced end that did not happen does not excuse the one that did: say so.
  return rank.planned ? fmt::format("{} after announcing a planned {}", rank.end.describe(), rank.planned->describe())
                      : rank.end.describe();
}

void RankSupervisor::report_failure(const Rank& rank, const std::string& how, std::optional<int> exit_code) {
  if (!job_exit_code_) job_exit_code_ = exit_code.value_or(rank.end.exit_code());
  const int others = running_count() - (rank.alive() ? 1 : 0);
  failure_summary_ = fmt::format("rank {} (pid {}) {}", rank.global_rank, rank.pid, how);
  job_event("{}; stopping {} other rank{}", *failure_summary_, others, others == 1 ? "" : "s");
  stop(SIGTERM, *job_exit_code_);
}

void RankSupervisor::stop(int signal, int exit_code) {
  if (!job_exit_code_) job_exit_code_ = exit_code;
  if (stopping_) return;
  stopping_ = true;
  signal_running(signal);
  kill_deadline_ = Clock::now() + options_.grace_period;
}

void RankSupervisor::signal_running(int signal) {
  const bool ends = signal != SIGUSR1 && signal != SIGUSR2;
  for (auto& rank : ranks_)
    if (rank.alive()) {
      rank.group.signal(signal);
      // A stopped rank acts on the signal only once continued (as Slurm does, SIGCONT follows).
      if (ends) rank.group.signal(SIGCONT);
    }
}

void RankSupervisor::kill_all_groups() {
  // Also groups whose leader exited: their members (a rank's own children) go too. Only
  // groups known to be still ours are signalled (ProcessGroup): never a reused number.
  for (auto& rank : ranks_) rank.group.signal(SIGKILL);
}

void RankSupervisor::kill_adopted_orphans() {
  // As child subreaper, hyrun becomes the parent of every descendant of a rank whose own
  // parent ended, also of one that left its rank's process group (setsid, a daemon).
  // Once every rank has ended, each child of hyrun is such a leftover, and killing it is
  // safe: an unreaped child's pid cannot belong to anyone else. Killing one may orphan
  // its own children to hyrun, hence rounds (bounded).
  for (int round = 0; round < 20; ++round) {
    std::vector<pid_t> children;
    if (DIR* tasks = ::opendir("/proc/self/task")) {
      while (const dirent* task = ::readdir(tasks)) {
        if (task->d_name[0] == '.') continue;
        std::ifstream list(fmt::format("/proc/self/task/{}/children", task->d_name));
        for (pid_t pid; list >> pid;) children.push_back(pid);
      }
      ::closedir(tasks);
    }
    if (children.empty()) return;
    for (pid_t pid : children) ::kill(pid, SIGKILL);
    // Reaped here, so that the next round sees only new orphans; bounded, as a process in
    // uninterruptible sleep dies only when it wakes (reap_children takes it then).
    std::size_t left = children.size();
    for (int wait = 0; wait < 100 && left > 0; ++wait) {
      for (pid_t& pid : children) {
        int status;
        if (pid > 0 && ::waitpid(pid, &status, WNOHANG) != 0) pid = 0, --left;
      }
      if (left > 0) ::usleep(10000);
    }
    if (left > 0) return;
  }
}

void RankSupervisor::on_publish_readable() {
  try {
    publish_.on_readable();
  } catch (const Error& e) {  // rank 0 broke the publish protocol: the job cannot start
    stop(SIGTERM, e.exit_code());
    throw;
  }
}

void RankSupervisor::fail_bootstrap(const std::string& message, int exit_code) {
  stop(SIGTERM, exit_code);
  throw Error(message, exit_code);
}

std::optional<std::string> RankSupervisor::await_root_address() {
  if (stopping_) return std::nullopt;  // e.g. a signal came before rank 0 was started
  const auto deadline = Clock::now() + options_.bootstrap_timeout;
  std::optional<Clock::time_point> closed_at;
  auto root = std::find_if(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.global_rank == 0; });
  if (root == ranks_.end()) throw Error("await_root_address: rank 0 was not started on this node");
  const pid_t root_pid = root->pid;
  constexpr auto kHint = "a program that does not use the hyrun worker library must be started with --bootstrap=none";

  awaiting_address_ = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{awaiting_address_};
  const auto hint_at = Clock::now() + kHelloWait;
  bool hinted = false;
  while (!publish_.address()) {
    if (stopping_) return std::nullopt;
    if (!hinted && !publish_.said_hello() && Clock::now() >= hint_at && hint_at < deadline) {
      hinted = true;
      const auto waited = std::chrono::duration_cast<std::chrono::seconds>(kHelloWait).count();
      const auto left = std::chrono::duration_cast<std::chrono::seconds>(deadline - Clock::now()).count();
      job_event(
          "rank 0 (pid {}) has run {} s without loading the hyrun worker library, so it will probably never "
          "publish a UCX address: {} (torch.distributed programs too: hyrun gives them MASTER_ADDR and "
          "MASTER_PORT); waiting up to {} s more (--bootstrap-timeout)",
          root_pid, waited, kHint, left);
    }
    auto& rank0 = *std::find_if(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.global_rank == 0; });
    if (publish_.closed_early() && !closed_at) closed_at = Clock::now();
    if (!rank0.alive() || (closed_at && Clock::now() - *closed_at >= kExitGrace)) {
      // Rank 0 ended (or closed the fd and did not end within a second) without publishing.
      const std::string how =
          rank0.alive() ? fmt::format("closed {} and is still running", env::kPublishFd) : rank0.end.describe();
      const int code = !rank0.alive() && rank0.end.failed() ? rank0.end.exit_code() : exit_code::kLauncherError;
      job_exit_code_ = code;  // the cause is reported by this error, not as a rank failure
      // The hint is true only of a program that ended as if it knew nothing of hyrun; one
      // that failed (a bad option, a worker library that could not start UCX) said why itself.
      const bool hint = rank0.alive() || !rank0.end.failed();
      fail_bootstrap(fmt::format("rank 0 (pid {}) {} before publishing its UCX address{}", root_pid, how,
                                 hint ? fmt::format("; {}", kHint) : std::string()),
                     code);
    }
    if (Clock::now() >= deadline) {
      stop(SIGTERM, exit_code::kTimeout);
      throw TimeoutError(
          fmt::format("rank 0 (pid {}) did not publish its UCX address within {} s "
                      "(--bootstrap-timeout); {}",
                      root_pid, std::chrono::duration<double>(options_.bootstrap_timeout).count(), kHint));
    }
    auto wake = closed_at ? std::min(deadline, *closed_at + kExitGrace) : deadline;
    if (!hinted && !publish_.said_hello()) wake = std::min(wake, hint_at);
    poll_once(wake);
  }
  return publish_.address();
}

JobResult RankSupervisor::finish() {
  while (running_count() > 0 || pending_verdict()) poll_once(Clock::now() + std::chrono::seconds(1));
  // Every rank has exited: whatever is left in their process groups goes now, like srun
  // ending a step. Then the output they leave behind is drained, bounded in time.
  kill_all_groups();
  kill_adopted_orphans();
  // What they left in their pipes is read regardless of a slow reader (bounded: the
  // writers are gone), then goes out as fast as the reader takes it, as a pipeline's
  // writer would wait for it. Once the job is stopping (a signal to hyrun, a failure),
  // all of this ends within kDrainLimit: a stalled reader cannot keep hyrun.
  output_.set_draining();
  auto until = Clock::now() + kDrainLimit;
  while (!output_.all_closed() && Clock::now() < until) poll_once(until);
  output_.drain_all();
  bool was_stopping = stopping_;
  until = stopping_ ? until : Clock::now() + kDrainLimit;
  while (output_.has_pending() && (!stopping_ || Clock::now() < until)) {
    if (stopping_ && !was_stopping) {  // told to stop while waiting for a slow reader
      was_stopping = true;
      until = Clock::now() + kDrainLimit;
    }
    poll_once(stopping_ ? until : Clock::now() + std::chrono::seconds(1));
  }
  job_event_sink() = nullptr;  // the loop is over: later lines (main's error) go to stdio, after these
  // Said only where it can be read: not on a stderr that is itself stalled.
  if (output_.has_pending() && !output_.has_pending(2))
    spdlog::warn("the reader of hyrun's output did not take the last of it within {} s; the rest is dropped",
                 std::chrono::duration_cast<std::chrono::seconds>(kDrainLimit).count());
  reap_children();
  return JobResult{job_exit_code_.value_or(0), stop_signal_, failure_summary_};
}

}  // namespace hyrun
