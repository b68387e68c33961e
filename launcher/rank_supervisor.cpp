#include "hyrun/launcher/rank_supervisor.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <utility>
#include <variant>

#include "hyrun/common/env_contract.hpp"
#include "hyrun/common/error.hpp"
#include "hyrun/common/start_rank_request.hpp"
#include "hyrun/process/adopted_orphans.hpp"
#include "hyrun/process/child_process.hpp"
#include "hyrun/process/job_events.hpp"
#include "hyrun/process/open_file_limit.hpp"

namespace hyrun {

using Clock = std::chrono::steady_clock;

namespace {
constexpr auto kExitGrace = std::chrono::seconds(1);   // rank 0 closed its fd: wait this long for its status
constexpr auto kDrainLimit = std::chrono::seconds(2);  // output of killed process groups
// A rank 0 that has not loaded the worker library this long after its start most likely
// never will (the library says hello before main): hyrun says so instead of waiting silently.
constexpr auto kHelloWait = std::chrono::seconds(3);
constexpr auto kUnreadLook = std::chrono::milliseconds(10);  // an ended rank's connection, still open in libpmix
constexpr auto kHint = "a program that does not use the hyrun worker library must be started with --bootstrap=none";
}  // namespace

RankSupervisor::RankSupervisor(SupervisorOptions options, SignalEvents& signals)
    : options_(std::move(options)),
      signals_(signals),
      processes_(options_.command, options_.label, options_.timestamp_output, options_.output_filename),
      policy_(options_.max_restarts) {}

int RankSupervisor::running_count() const { return processes_.running_count(); }

void RankSupervisor::start(RankLaunch launch) {
  // Starting many ranks takes a while outside the loop: a stop signal is honoured here too,
  // and nothing new starts once the job is stopping.
  if (signals_.pending_stop()) on_signals();
  if (stopping_) return;
  const int global_rank = launch.global_rank;
  try {
    processes_.start(std::move(launch));
  } catch (const SpawnError& e) {
    policy_.set_exit_code(e.exit_code());
    if (running_count() > 0) stop(SIGTERM, e.exit_code());
    if (e.errnum() != EMFILE && e.errnum() != ENFILE) throw;
    throw Error(describe_fd_exhaustion(global_rank), exit_code::kLauncherError);
  } catch (const SystemError& e) {
    if (e.errnum() != EMFILE && e.errnum() != ENFILE) throw;
    policy_.set_exit_code(exit_code::kLauncherError);
    throw Error(describe_fd_exhaustion(global_rank), exit_code::kLauncherError);
  }
}

void RankSupervisor::poll_once(Clock::time_point deadline) {
  std::vector<pollfd> fds;
  fds.push_back({signals_.fd(), POLLIN, 0});
  PublishChannel& publish = processes_.publish();
  if (publish.fd() >= 0) fds.push_back({publish.fd(), POLLIN, 0});
  processes_.add_poll_fds(fds);
  for (const auto& rank : processes_.all())
    if (rank.control) fds.push_back({rank.control.fd(), POLLIN, 0});
  for (auto* participant : participants_) participant->add_poll_fds(fds);

  auto until = deadline;
  for (const auto* participant : participants_) until = std::min(until, participant->wake_by());
  if (stopping_ && !killed_) until = std::min(until, kill_deadline_);
  if (policy_.pending()) until = std::min(until, policy_.pending_due());
  // No descriptor tells when libpmix's thread has read a connection to its end: look again soon.
  if (!unread_ends_.empty()) until = std::min(until, Clock::now() + kUnreadLook);
  const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
  const int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<long long>(wait_ms, 0, 1000)));
  if (n < 0 && errno != EINTR) throw SystemError("poll", errno);
  for (const auto& p : fds) {
    if (!p.revents) continue;
    if (processes_.on_poll(p)) continue;
    if (std::any_of(participants_.begin(), participants_.end(), [&p](PollParticipant* q) { return q->on_poll(p); }))
      continue;
    if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
    if (p.fd == signals_.fd()) {
      on_signals();
    } else if (publish.fd() >= 0 && p.fd == publish.fd()) {
      on_publish_readable();
    } else {
      auto& all = processes_.all();
      const auto it =
          std::find_if(all.begin(), all.end(), [&](const RankProcess& r) { return r.control.fd() == p.fd; });
      if (it != all.end()) on_control_readable(*it);
    }
  }
  start_requested_ranks();
  for (auto* participant : participants_) participant->on_tick();
  if (policy_.pending() && Clock::now() >= policy_.pending_due()) settle_verdict();
  if (!unread_ends_.empty()) judge_unread_ends();
  if (stopping_ && !killed_ && Clock::now() >= kill_deadline_) {
    const int left = running_count();
    if (left > 0)
      job_event("{} rank(s) still running {} s after they were asked to stop; sending SIGKILL", left,
                std::chrono::duration_cast<std::chrono::seconds>(options_.grace_period).count());
    kill_now();
  }
}

void RankSupervisor::kill_now() {
  processes_.kill_all_groups();
  killed_ = true;
}

void RankSupervisor::on_signals() {
  for (int sig : signals_.drain()) {
    switch (sig) {
      case SIGCHLD: reap_children(); break;
      case SIGUSR1:
      case SIGUSR2: processes_.signal_running(sig); break;
      case SIGINT:
        if (++interrupts_ >= 2 && !killed_) {
          job_event("second SIGINT: killing {} rank(s) now", running_count());
          kill_now();
          break;
        }
        [[fallthrough]];
      default: on_stop_signal(sig);  // SIGTERM, SIGHUP
    }
  }
}

void RankSupervisor::on_stop_signal(int sig) {
  if (!stopping_)
    job_event("received {}; forwarding it to {} rank(s), SIGKILL follows in {} s", signal_name(sig), running_count(),
              std::chrono::duration_cast<std::chrono::seconds>(options_.grace_period).count());
  policy_.on_stop_signal(sig);
  processes_.signal_running(sig);
  if (!stopping_) {
    stopping_ = true;
    kill_deadline_ = Clock::now() + options_.grace_period;
  }
}

void RankSupervisor::reap_children() {
  std::vector<ProcessEvent> ended;
  for (const auto& event : processes_.reap()) {
    if (event.kind == ProcessEvent::Kind::kStopped)
      on_rank_stopped(event.process, event.status);
    else
      ended.push_back(event);
  }
  // What the ranks told the participants before they ended is taken in first (a PMIx
  // client's goodbye), then ends reaped in one batch are judged, in the policy's order.
  if (!ended.empty()) settle_participants();
  JobPolicy::order_for_judgement(ended);
  for (const auto& end : ended) on_rank_exit(end.process, end.status);
}

void RankSupervisor::on_control_readable(RankProcess& rank) {
  for (auto& message : rank.control.receive()) {
    if (std::holds_alternative<control::HandlesDeaths>(message)) {
      on_handles_deaths(rank);
    } else if (const auto* start = std::get_if<control::StartRank>(&message)) {
      if (rank.global_rank != 0)
        spdlog::warn("rank {} asked to start rank {}, which only rank 0 may; ignored", rank.global_rank,
                     start->global_rank);
      else
        requested_starts_.push_back(start->global_rank);  // started after the poll round: starting grows the list
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

bool RankSupervisor::every_rank_handles_deaths() const { return JobPolicy::all_handle_deaths(processes_.all()); }

void RankSupervisor::tell_death(int dead) {
  for (auto& rank : processes_.all())
    if (JobPolicy::hears_death(rank, dead)) rank.control.tell_death(rank.global_rank, dead);
}

void RankSupervisor::on_handles_deaths(RankProcess& rank) {
  if (rank.handles_deaths) return;
  rank.handles_deaths = true;
  spdlog::debug("rank {} (pid {}) handles peers' deaths", rank.global_rank, rank.pid);
  for (int dead : policy_.deaths_so_far(processes_.all())) rank.control.tell_death(rank.global_rank, dead);
}

void RankSupervisor::report_remote_deaths(int first, int count) {
  policy_.add_remote_deaths(first, count);
  for (int r = first; r < first + count; ++r) tell_death(r);
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
    const auto& all = processes_.all();
    const auto processes =
        std::count_if(all.begin(), all.end(), [&](const RankProcess& r) { return r.global_rank == global_rank; });
    if (const RankProcess* latest = processes_.latest(global_rank); latest && latest->alive()) {
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

void RankSupervisor::on_rank_exit(std::size_t process, int wait_status) {
  processes_.record_end(process, wait_status);
  RankProcess& rank = processes_.all()[process];
  // A message sent just before death is still in the socket: read it before judging.
  if (rank.control) on_control_readable(rank);
  // The survivors that handle deaths learn of it now, whatever the verdict below (before a
  // restart, so that the notice always precedes the new process's join).
  tell_death(rank.global_rank);
  // A client that ended without its finalize read yet is judged again once it is read. Whether
  // libpmix still holds its connection is looked at before the events are taken in: it may
  // read the finalize and close between the two.
  bool unread = false;
  if (rank.pmix_connected && !rank.pmix_finalized && !rank.end.failed()) {
    unread = still_read(rank.pid);
    if (!unread) settle_participants();
  }
  JudgedMoment now{stopping_, awaiting_address_, "", unread};
  OutputForwarder& output = processes_.output();
  if (output.broken(1) || output.broken(2)) now.lost_reader = output.broken(1) ? "stdout" : "stderr";
  act_on(policy_.judge_end(rank, now), process);
}

void RankSupervisor::act_on(const Verdict& verdict, std::size_t process) {
  const RankProcess& rank = processes_.all()[process];
  if (verdict.announced)
    spdlog::info("rank {} (pid {}) {}, as it announced", rank.global_rank, rank.pid, rank.end.describe());
  switch (verdict.kind) {
    case Verdict::Kind::kRestart:
      respawn(rank.local_rank, rank.global_rank, rank.incarnation);  // grows the list: `rank` is not used after this
      return;
    case Verdict::Kind::kPending: policy_.defer(process, Clock::now() + JobPolicy::kSignalSettle); return;
    case Verdict::Kind::kUnread: unread_ends_.push_back({process, Clock::now() + options_.bootstrap_timeout}); return;
    case Verdict::Kind::kFailure: report_failure(rank, verdict.how, verdict.exit_code); return;
    case Verdict::Kind::kAsAnnounced:
    case Verdict::Kind::kBootstrap:  // await_root_address reports it
    case Verdict::Kind::kNoFailure:
    case Verdict::Kind::kSuspended: return;  // said by on_rank_stopped
  }
}

void RankSupervisor::on_rank_stopped(std::size_t process, int signal) {
  const RankProcess& rank = processes_.all()[process];
  const Verdict verdict = policy_.judge_stop(signal, stopping_);
  if (verdict.kind == Verdict::Kind::kSuspended)
    job_event("rank {} (pid {}) was stopped by signal {} ({}); the job waits until it continues (SIGCONT)",
              rank.global_rank, rank.pid, signal, signal_name(signal));
  else
    act_on(verdict, process);
}

void RankSupervisor::settle_participants() {
  for (auto* participant : participants_) participant->settle();
}

bool RankSupervisor::still_read(pid_t pid) const {
  return std::any_of(participants_.begin(), participants_.end(),
                     [pid](const PollParticipant* p) { return p->still_reading(pid); });
}

void RankSupervisor::judge_unread_ends() {
  const auto now = Clock::now();
  auto ends = std::exchange(unread_ends_, {});
  // Looked at first, then the events taken in: what libpmix read before it closed a connection
  // (a finalize) is among them, though it closed after the settle began.
  std::vector<bool> unread_now;
  for (const UnreadEnd& end : ends) unread_now.push_back(still_read(processes_.all()[end.process].pid));
  settle_participants();
  for (std::size_t i = 0; i < ends.size(); ++i) {
    const UnreadEnd& end = ends[i];
    const RankProcess& rank = processes_.all()[end.process];
    const bool unread = unread_now[i];
    if (unread && now < end.due && !stopping_) {  // a stopping job judges no such end a failure: now
      unread_ends_.push_back(end);
      continue;
    }
    if (unread)
      spdlog::warn(
          "rank {} (pid {}) ended, and hyrun's PMIx server has not read its connection to the end within {} s "
          "(--bootstrap-timeout; a process the rank left may hold it); judged without what it did not read",
          rank.global_rank, rank.pid, std::chrono::duration<double>(options_.bootstrap_timeout).count());
    act_on(policy_.judge_end(rank, JudgedMoment{stopping_, awaiting_address_, "", false}), end.process);
  }
}

void RankSupervisor::settle_verdict() {
  const std::size_t process = *policy_.pending();
  if (policy_.settle()) {
    const RankProcess& rank = processes_.all()[process];
    report_failure(rank, JobPolicy::describe_end(rank));
  }
}

void RankSupervisor::report_failure(const RankProcess& rank, const std::string& how, std::optional<int> exit_code) {
  const std::string& summary = policy_.fail(rank, how, exit_code);
  const int others = running_count() - (rank.alive() ? 1 : 0);
  job_event("{}; stopping {} other rank{}", summary, others, others == 1 ? "" : "s");
  stop(SIGTERM, *policy_.exit_code());
}

void RankSupervisor::stop(int signal, int exit_code) {
  policy_.set_exit_code(exit_code);
  if (stopping_) return;
  stopping_ = true;
  processes_.signal_running(signal);
  kill_deadline_ = Clock::now() + options_.grace_period;
}

void RankSupervisor::on_publish_readable() {
  try {
    processes_.publish().on_readable();
  } catch (const Error& e) {  // rank 0 broke the publish protocol: the job cannot start
    stop(SIGTERM, e.exit_code());
    throw;
  }
}

void RankSupervisor::fail_bootstrap(const std::string& message, int exit_code) {
  stop(SIGTERM, exit_code);
  throw Error(message, exit_code);
}

void RankSupervisor::check_root_alive(pid_t root_pid, std::optional<Clock::time_point> closed_at) {
  const RankProcess& rank0 = *processes_.latest(0);
  if (rank0.alive() && !(closed_at && Clock::now() - *closed_at >= kExitGrace)) return;
  // Rank 0 ended (or closed the fd and did not end within a second) without publishing.
  const std::string how =
      rank0.alive() ? fmt::format("closed {} and is still running", env::kPublishFd) : rank0.end.describe();
  const int code = !rank0.alive() && rank0.end.failed() ? rank0.end.exit_code() : exit_code::kLauncherError;
  policy_.force_exit_code(code);  // the cause is reported by this error, not as a rank failure
  // The hint is true only of a program that ended as if it knew nothing of hyrun; one
  // that failed (a bad option, a worker library that could not start UCX) said why itself.
  const bool hint = rank0.alive() || !rank0.end.failed();
  fail_bootstrap(fmt::format("rank 0 (pid {}) {} before publishing its UCX address{}", root_pid, how,
                             hint ? fmt::format("; {}", kHint) : std::string()),
                 code);
}

void RankSupervisor::on_pmix_client(int global_rank, PmixClientStep step, const char* api) {
  RankProcess* rank = processes_.latest(global_rank);
  if (rank == nullptr) return;  // not a rank of this node (libpmix checked it)
  // A finalize read after the process ended still counts: its verdict may wait for it
  // (judge_unread_ends); one already judged is not changed by it.
  if (!rank->alive() && step != PmixClientStep::kFinalized) return;
  switch (step) {
    case PmixClientStep::kConnected:
      rank->pmix_connected = true;
      rank->client_api = api;
      spdlog::debug("rank {} (pid {}) connected to hyrun's {} server", global_rank, rank->pid, api);
      break;
    case PmixClientStep::kFinalized: rank->pmix_finalized = true; break;
  }
}

void RankSupervisor::on_pmix_abort(int global_rank, int status, const std::string& message, const char* api) {
  const RankProcess* rank = processes_.latest(global_rank);
  if (rank == nullptr || policy_.exit_code()) return;  // the first failure stays the job's
  // mpirun's convention: the job ends with the status the rank gave, as an exit code keeps
  // it, and 1 where that would read 0 (0, 256, ...): it failed.
  report_failure(*rank,
                 fmt::format("called MPI_Abort/{}_Abort with status {}{}", api, status,
                             message.empty() ? "" : fmt::format(": {}", message)),
                 exit_code::of_failure_status(status));
}

bool RankSupervisor::judge_pmix_handshake(pid_t pid, Clock::time_point admitted) {
  const auto rank = std::find_if(processes_.all().begin(), processes_.all().end(),
                                 [pid](const RankProcess& r) { return r.pid == pid; });
  if (rank == processes_.all().end() || !rank->alive() || rank->pmix_connected) return true;
  const auto waited = Clock::now() - admitted;
  if (waited < options_.bootstrap_timeout) return false;
  if (!policy_.exit_code())
    report_failure(*rank,
                   fmt::format("connected to hyrun's PMIx server {:.1f} s ago, and libpmix has not completed its "
                               "handshake (--bootstrap-timeout); libpmix 4.2.2 never does after a handshake in the "
                               "rank's name failed half-way (one forged by a process of the job), or while a process "
                               "of the job holds its handshake thread (docs/pmix.md)",
                               std::chrono::duration<double>(waited).count()),
                   exit_code::kTimeout);
  return true;
}

bool RankSupervisor::root_is_pmix_client() const {
  const RankProcess* root = processes_.latest(0);
  return root != nullptr && root->pmix_connected;
}

std::optional<std::string> RankSupervisor::await_root_address(const std::function<void()>& on_hello) {
  if (stopping_) return std::nullopt;  // e.g. a signal came before rank 0 was started
  const auto deadline = Clock::now() + options_.bootstrap_timeout;
  std::optional<Clock::time_point> closed_at;
  const RankProcess* root = processes_.latest(0);
  if (!root) throw Error("await_root_address: rank 0 was not started on this node");
  const pid_t root_pid = root->pid;
  PublishChannel& publish = processes_.publish();

  awaiting_address_ = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{awaiting_address_};
  const auto hint_at = Clock::now() + kHelloWait;
  bool hinted = false, hello_told = false;
  while (!publish.address()) {
    if (stopping_) return std::nullopt;
    // An MPI (PMIx) program: it will never publish, and its MPI_Init waits for the others.
    if (root_is_pmix_client()) return std::nullopt;
    if (on_hello && !hello_told && publish.said_hello()) {
      hello_told = true;
      on_hello();
      continue;  // it took a while: look at what came meanwhile first
    }
    if (!hinted && !publish.said_hello() && Clock::now() >= hint_at && hint_at < deadline) {
      hinted = true;
      const auto waited = std::chrono::duration_cast<std::chrono::seconds>(kHelloWait).count();
      const auto left = std::chrono::duration_cast<std::chrono::seconds>(deadline - Clock::now()).count();
      job_event(
          "rank 0 (pid {}) has run {} s without loading the hyrun worker library, so it will probably never "
          "publish a UCX address: {} (torch.distributed programs too: hyrun gives them MASTER_ADDR and "
          "MASTER_PORT); waiting up to {} s more (--bootstrap-timeout)",
          root_pid, waited, kHint, left);
    }
    if (publish.closed_early() && !closed_at) closed_at = Clock::now();
    check_root_alive(root_pid, closed_at);
    if (Clock::now() >= deadline) {
      stop(SIGTERM, exit_code::kTimeout);
      throw TimeoutError(
          fmt::format("rank 0 (pid {}) did not publish its UCX address within {} s "
                      "(--bootstrap-timeout); {}",
                      root_pid, std::chrono::duration<double>(options_.bootstrap_timeout).count(), kHint));
    }
    auto wake = closed_at ? std::min(deadline, *closed_at + kExitGrace) : deadline;
    if (!hinted && !publish.said_hello()) wake = std::min(wake, hint_at);
    poll_once(wake);
  }
  return publish.address();
}

JobResult RankSupervisor::finish() {
  while (running_count() > 0 || policy_.pending() || !unread_ends_.empty())
    poll_once(Clock::now() + std::chrono::seconds(1));
  // Every rank has exited: whatever is left in their process groups goes now, like srun
  // ending a step. Then the output they leave behind is drained, bounded in time.
  processes_.kill_all_groups();
  kill_adopted_orphans();
  // What they left in their pipes is read regardless of a slow reader (bounded: the
  // writers are gone), then goes out as fast as the reader takes it, as a pipeline's
  // writer would wait for it. Once the job is stopping (a signal to hyrun, a failure),
  // all of this ends within kDrainLimit: a stalled reader cannot keep hyrun.
  OutputForwarder& output = processes_.output();
  output.set_draining();
  auto until = Clock::now() + kDrainLimit;
  while (!output.all_closed() && Clock::now() < until) poll_once(until);
  output.drain_all();
  bool was_stopping = stopping_;
  until = stopping_ ? until : Clock::now() + kDrainLimit;
  while (output.has_pending() && (!stopping_ || Clock::now() < until)) {
    if (stopping_ && !was_stopping) {  // told to stop while waiting for a slow reader
      was_stopping = true;
      until = Clock::now() + kDrainLimit;
    }
    poll_once(stopping_ ? until : Clock::now() + std::chrono::seconds(1));
  }
  job_event_sink() = nullptr;  // the loop is over: later lines (main's error) go through OwnStderr, behind these
  if (output.has_pending()) {
    // Dropped, so that hyrun's own lines after the loop (OwnStderr, at exit) do not wait behind
    // it; said only where it can be read: not on a stderr that is itself stalled.
    const bool stderr_stalled = output.has_pending(2);
    output.drop_pending();
    if (!stderr_stalled)
      spdlog::warn("the reader of hyrun's output did not take the last of it within {} s; the rest is dropped",
                   std::chrono::duration_cast<std::chrono::seconds>(kDrainLimit).count());
  }
  reap_children();
  JobResult result = policy_.result();
  if (!output.lost_files().empty() && result.exit_code == exit_code::kSuccess) {
    // Every rank succeeded, but what the user asked to keep is incomplete: not a success.
    spdlog::error("every rank exited 0, but --output-filename lost output: {}; exit 1",
                  fmt::join(output.lost_files(), ", "));
    result.exit_code = exit_code::kLauncherError;
  }
  return result;
}

}  // namespace hyrun
