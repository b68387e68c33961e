#include "hyrun/launcher/job_policy.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>

#include "hyrun/common/error.hpp"

namespace hyrun {
namespace {
// The signals of a stop or a cancel (hyrun's own, scancel's, a PMIx abort's).
bool killed_by_terminating_signal(int wait_status) {
  if (!WIFSIGNALED(wait_status)) return false;
  const int sig = WTERMSIG(wait_status);
  return sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGKILL;
}
}  // namespace

Verdict JobPolicy::judge_end(const RankProcess& rank, const JudgedMoment& now) const {
  const int status = rank.end.wait_status;
  if (rank.planned && rank.planned->matches(status)) {
    if (!rank.planned->respawn || now.stopping) return {Verdict::Kind::kAsAnnounced, {}, {}, true};
    if (rank.incarnation < max_restarts_) return {Verdict::Kind::kRestart, {}, {}, true};
    // A rank that asks for restarts without end (a bug, or a plan gone wrong) must not spin
    // forever: the request over the budget is the job's failure.
    return {Verdict::Kind::kFailure,
            fmt::format("{} and asked to be restarted once more, over --max-restarts {} (restarted {} times)",
                        rank.end.describe(), max_restarts_, rank.incarnation),
            rank.end.failed() ? rank.end.exit_code() : exit_code::kLauncherError, true};
  }
  if (now.awaiting_address && rank.global_rank == 0) return {Verdict::Kind::kBootstrap};
  // MPI's rule: a process that started MPI and exits without MPI_Finalize failed, whatever
  // its exit status; its peers may wait for it in a collective.
  if (rank.pmix_connected && !rank.pmix_finalized && !rank.end.failed() && !exit_code_ && !pending_) {
    if (now.goodbye_unread) return {Verdict::Kind::kUnread};
    return {Verdict::Kind::kFailure,
            fmt::format("exited 0 without finalizing {} (MPI_Finalize, for an MPI program) after it initialized it",
                        rank.client_api),
            exit_code::kLauncherError};
  }
  if (!rank.end.failed() || exit_code_ || pending_) return {Verdict::Kind::kNoFailure};
  // SIGKILL too: a step cancel or a PMIx abort from another node kills hyrun and its ranks
  // together, and hyrun must not name a rank of that kill as the job's failure.
  if (killed_by_terminating_signal(status)) return {Verdict::Kind::kPending};
  std::string how = describe_end(rank);
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGPIPE && !now.lost_reader.empty())
    how += fmt::format(" after the reader of hyrun's {} went away", now.lost_reader);
  return {Verdict::Kind::kFailure, how};
}

Verdict JobPolicy::judge_stop(int signal, bool stopping) const {
  if (signal != SIGTTIN && signal != SIGTTOU) return {Verdict::Kind::kSuspended};
  if (exit_code_ || stopping) return {Verdict::Kind::kNoFailure};  // the stop continues it with its signal
  return {Verdict::Kind::kFailure,
          fmt::format("was stopped by signal {} ({}) for using the terminal, which ranks cannot", signal,
                      signal_name(signal)),
          128 + signal};
}

const std::string& JobPolicy::fail(const RankProcess& rank, const std::string& how, std::optional<int> exit_code) {
  if (!exit_code_) exit_code_ = exit_code.value_or(rank.end.exit_code());
  failure_ = fmt::format("rank {} (pid {}) {}", rank.global_rank, rank.pid, how);
  return *failure_;
}

void JobPolicy::defer(std::size_t process, std::chrono::steady_clock::time_point due) {
  pending_ = process;
  pending_due_ = due;
}

bool JobPolicy::settle() {
  pending_.reset();
  return !exit_code_;  // no signal reached hyrun meanwhile: a real failure
}

void JobPolicy::on_stop_signal(int signal) {
  if (!exit_code_) exit_code_ = 128 + signal;
  if (!stop_signal_) stop_signal_ = signal;
}

void JobPolicy::set_exit_code(int code) {
  if (!exit_code_) exit_code_ = code;
}

void JobPolicy::add_remote_deaths(int first, int count) {
  for (int r = first; r < first + count; ++r) remote_dead_.push_back(r);
}

std::vector<int> JobPolicy::deaths_so_far(const std::vector<RankProcess>& processes) const {
  std::vector<int> dead = remote_dead_;
  for (const auto& process : processes) {
    const auto latest = std::find_if(processes.rbegin(), processes.rend(),
                                     [&](const RankProcess& p) { return p.global_rank == process.global_rank; });
    if (&*latest == &process && !process.alive()) dead.push_back(process.global_rank);
  }
  return dead;
}

bool JobPolicy::hears_death(const RankProcess& listener, int dead) {
  return listener.alive() && listener.handles_deaths && listener.control && listener.global_rank != dead;
}

bool JobPolicy::all_handle_deaths(const std::vector<RankProcess>& processes) {
  return !processes.empty() &&
         std::all_of(processes.begin(), processes.end(), [](const RankProcess& p) { return p.handles_deaths; });
}

void JobPolicy::order_for_judgement(std::vector<ProcessEvent>& ends) {
  std::stable_partition(ends.begin(), ends.end(),
                        [](const ProcessEvent& e) { return killed_by_terminating_signal(e.status); });
}

std::string JobPolicy::describe_end(const RankProcess& rank) {
  // An announced end that did not happen does not excuse the one that did: say so.
  return rank.planned ? fmt::format("{} after announcing a planned {}", rank.end.describe(), rank.planned->describe())
                      : rank.end.describe();
}

}  // namespace hyrun
