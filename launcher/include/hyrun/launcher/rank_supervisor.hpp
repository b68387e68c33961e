#pragma once
// Starts this node's rank processes and supervises them in one poll loop: forwards their
// output, relays signals, takes rank 0's published address, stops everything on the
// first failure, and reaps every process. It joins the process mechanics
// (hyrun/process/rank_processes.hpp) and the job's policy (job_policy.hpp): the one acts,
// the other judges. Nothing outlives it: the destructor kills and reaps whatever is left.
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hyrun/launcher/job_policy.hpp"
#include "hyrun/launcher/job_result.hpp"
#include "hyrun/launcher/supervisor_options.hpp"
#include "hyrun/process/child_process.hpp"  // SpawnError, which start() rethrows
#include "hyrun/process/poll_participant.hpp"
#include "hyrun/process/rank_processes.hpp"
#include "hyrun/process/signal_events.hpp"

namespace hyrun {

class RankSupervisor {
 public:
  /// The fd number rank 0 finds its publish pipe at (HYRUN_PUBLISH_FD).
  static constexpr int kPublishFd = RankProcesses::kPublishFd;
  /// The fd number every rank finds its control socket at (HYRUN_CONTROL_FD).
  static constexpr int kControlFd = RankProcesses::kControlFd;

  /// Builds the launch of a new process for `local_rank` (its `incarnation`-th restart):
  /// used when a rank announced a planned exit with respawn and ended as it announced.
  /// Without one, such a request is refused with a warning and the exit is still treated
  /// as planned. A rank restarted --max-restarts times that asks once more fails the job.
  using Relauncher = std::function<RankLaunch(int local_rank, int incarnation)>;
  void set_relauncher(Relauncher relauncher) { relauncher_ = std::move(relauncher); }

  /// Builds the launch of a rank of this launch that rank 0 asked to start now (a
  /// "start-rank" control message, hyrun/common/start_rank_request.hpp): its first
  /// process, or its next (`incarnation` = processes of that rank so far). Throws Error
  /// naming why when it cannot (not a rank of this launch); the request is then refused
  /// with a warning. Without a starter every request is refused. A rank still running is
  /// never started twice.
  using RankStarter = std::function<RankLaunch(int global_rank, int incarnation)>;
  void set_rank_starter(RankStarter starter) { starter_ = std::move(starter); }

  /// Adds `participant` to the poll loop from now on (e.g. the link among the nodes' hyrun
  /// processes); it must outlive this supervisor's loop.
  void add_participant(PollParticipant& participant) { participants_.push_back(&participant); }

  RankSupervisor(SupervisorOptions options, SignalEvents& signals);
  /// Kills and reaps whatever is left (RankProcesses); never throws (a failure is logged).
  ~RankSupervisor() = default;
  RankSupervisor(const RankSupervisor&) = delete;
  RankSupervisor& operator=(const RankSupervisor&) = delete;

  /// Starts one rank. On SpawnError the job is marked failed with its exit code, the
  /// others are stopped, and the error is rethrown for main to print. Acts first on a
  /// pending stop signal; starts nothing once the job is stopping.
  void start(RankLaunch launch);

  /// What a rank did through hyrun's PMIx server (pmix_service.hpp) or, with `api` "PMI",
  /// its PMI-1 server (pmi_service.hpp). `api` must be a string literal.
  enum class PmixClientStep { kConnected, kFinalized };
  void on_pmix_client(int global_rank, PmixClientStep step, const char* api = "PMIx");
  /// A rank called PMIx_Abort or PMI_Abort (MPI_Abort): the job fails with `status` (1 for
  /// 0), naming it.
  void on_pmix_abort(int global_rank, int status, const std::string& message, const char* api = "PMIx");
  /// A connection to hyrun's PMIx server from the process tree of this node's rank process
  /// `pid`, taken by libpmix at `admitted`, is still open. When that rank's PMIx_Init has not
  /// completed past --bootstrap-timeout, the job fails (exit 124), naming the rank: libpmix
  /// 4.2.2 never admits a rank after a handshake in its name failed half-way (docs/pmix.md).
  /// Returns whether the connection needs no more judging (the rank connected, it is not a
  /// running rank of this node, or the job failed for it now).
  bool judge_pmix_handshake(pid_t pid, std::chrono::steady_clock::time_point admitted);
  /// Rank 0 connected to hyrun's PMIx server: an MPI program, which never publishes an address.
  bool root_is_pmix_client() const;

  /// Runs the loop until the publishing rank has written its address (returned, hex), or
  /// the job is stopping, or rank 0 connected to hyrun's PMIx server (std::nullopt: tell
  /// them apart with stopping() and root_is_pmix_client()).
  /// Throws Error/TimeoutError (after stopping the ranks) when rank 0 closes its publish
  /// fd, exits without publishing, or stays silent past --bootstrap-timeout. When rank 0
  /// has not said hello (loaded the worker library) within a few seconds, a line says that
  /// it probably never will and points to --bootstrap=none; the wait goes on to the limit.
  /// `on_hello`, when given, is called once (from the loop, not from a handler) when rank 0
  /// says it uses the worker library (its hello at load): the moment to start the others.
  std::optional<std::string> await_root_address(const std::function<void()>& on_hello = {});

  /// Runs the loop until every rank has exited; kills leftovers of their process groups;
  /// returns how the job ended.
  JobResult finish();

  /// Stops the job from outside (e.g. a failure on another node): `signal` now, SIGKILL
  /// after the grace period. `exit_code` becomes the job's if none is set yet.
  void stop(int signal, int exit_code);

  /// Acts on the signals queued for hyrun now (forwarding, stopping), for callers that
  /// waited outside the loop and saw SignalEvents::pending_stop().
  void handle_signals() { on_signals(); }

  bool stopping() const { return stopping_; }
  /// Rank processes not yet ended (running or suspended).
  int running_count() const;

  /// True when every rank process started here so far said on its control channel that it
  /// handles peers' deaths ("handles-deaths v1", docs/architecture.md): an elastic program,
  /// which may go on when another node is lost. False before any rank has started.
  bool every_rank_handles_deaths() const;
  /// Another node was lost: global ranks [first, first + count) are dead. Tells every local
  /// rank that handles deaths, now and when one asks later.
  void report_remote_deaths(int first, int count);

 private:
  void poll_once(std::chrono::steady_clock::time_point deadline);
  void on_signals();
  void on_stop_signal(int signal);
  void reap_children();
  void on_rank_exit(std::size_t process, int wait_status);
  void on_rank_stopped(std::size_t process, int signal);
  void act_on(const Verdict& verdict, std::size_t process);
  /// Records the failure (JobPolicy::fail), says it, and stops the other ranks.
  void report_failure(const RankProcess& rank, const std::string& how, std::optional<int> exit_code = {});
  void settle_verdict();
  /// Takes in what the participants were told so far (PollParticipant::settle).
  void settle_participants();
  /// Whether a participant may not have read all that the ended process `pid` sent it.
  bool still_read(pid_t pid) const;
  /// Judges the ends that waited for their connection to be read (Verdict::Kind::kUnread),
  /// now read or past --bootstrap-timeout.
  void judge_unread_ends();
  void on_publish_readable();
  void on_control_readable(RankProcess& rank);
  /// Tells every running local rank that handles deaths, but `dead` itself, that the
  /// current process of global rank `dead` has ended.
  void tell_death(int dead);
  /// `rank` asked to be told of deaths: first of those that happened before.
  void on_handles_deaths(RankProcess& rank);
  void respawn(int local_rank, int global_rank, int incarnation);
  void start_requested_ranks();
  /// SIGKILL to every rank's group now (the grace period ended, or a second SIGINT).
  void kill_now();
  void fail_bootstrap(const std::string& message, int exit_code);
  /// Fails the bootstrap when rank 0 ended, or closed its publish fd `closed_at` and did not
  /// end within a grace, before publishing.
  void check_root_alive(pid_t root_pid, std::optional<std::chrono::steady_clock::time_point> closed_at);

  Relauncher relauncher_;
  RankStarter starter_;
  std::vector<int> requested_starts_;  // from rank 0, started after the poll round
  std::vector<PollParticipant*> participants_;
  const SupervisorOptions options_;
  SignalEvents& signals_;
  RankProcesses processes_;
  JobPolicy policy_;
  bool awaiting_address_ = false;  // rank 0's end is then reported as a bootstrap failure
  struct UnreadEnd {
    std::size_t process;
    std::chrono::steady_clock::time_point due;
  };
  std::vector<UnreadEnd> unread_ends_;  // judged once their connection is read (judge_unread_ends)

  bool stopping_ = false;
  bool killed_ = false;
  int interrupts_ = 0;
  std::chrono::steady_clock::time_point kill_deadline_{};
};

}  // namespace hyrun
