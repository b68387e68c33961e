#pragma once
// Starts this node's rank processes and supervises them in one poll loop: forwards their
// output, relays signals, takes rank 0's published address, stops everything on the
// first failure, and reaps every process. Nothing outlives it: the destructor kills and
// reaps whatever is left.
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hyrun/common/planned_exit.hpp"
#include "hyrun/launcher/job_result.hpp"
#include "hyrun/launcher/supervisor_options.hpp"
#include "hyrun/process/child_process.hpp"
#include "hyrun/process/control_channel.hpp"
#include "hyrun/process/input_forwarder.hpp"
#include "hyrun/process/output_forwarder.hpp"
#include "hyrun/process/poll_participant.hpp"
#include "hyrun/process/process_group.hpp"
#include "hyrun/process/publish_channel.hpp"
#include "hyrun/process/signal_events.hpp"
#include "hyrun/process/wait_status.hpp"

namespace hyrun {

/// One rank to start.
struct RankLaunch {
  int global_rank = 0;
  int local_rank = 0;
  std::vector<std::string> environment;             ///< complete, as NAME=value
  bool publishes_address = false;                   ///< rank 0 under --bootstrap=ucx: gets the publish fd
  std::function<int(char*, std::size_t)> pre_exec;  ///< binding, applied in the child
  int incarnation = 0;                              ///< restarts of this rank so far
};

class RankSupervisor {
 public:
  /// The fd number rank 0 finds its publish pipe at (HYRUN_PUBLISH_FD).
  static constexpr int kPublishFd = PublishChannel::kChildFd;
  /// The fd number every rank finds its control socket at (HYRUN_CONTROL_FD).
  static constexpr int kControlFd = ControlChannel::kChildFd;

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
  /// Kills and reaps whatever is left; never throws (a failure is logged).
  ~RankSupervisor();
  RankSupervisor(const RankSupervisor&) = delete;
  RankSupervisor& operator=(const RankSupervisor&) = delete;

  /// Starts one rank. On SpawnError the job is marked failed with its exit code, the
  /// others are stopped, and the error is rethrown for main to print. Acts first on a
  /// pending stop signal; starts nothing once the job is stopping.
  void start(RankLaunch launch);

  /// Runs the loop until the publishing rank has written its address (returned, hex), or
  /// the job is stopping (std::nullopt: a signal or failure; finish() then ends it).
  /// Throws Error/TimeoutError (after stopping the ranks) when rank 0 closes its publish
  /// fd, exits without publishing, or stays silent past --bootstrap-timeout. When rank 0
  /// has not said hello (loaded the worker library) within a few seconds, a line says that
  /// it probably never will and points to --bootstrap=none; the wait goes on to the limit.
  std::optional<std::string> await_root_address();

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
  /// Where a rank process is in its life.
  enum class RankState {
    kRunning,
    kSuspended,  ///< stopped by a signal (WIFSTOPPED); the job waits for its SIGCONT
    /// Killed by SIGTERM/SIGINT/SIGHUP/SIGKILL, which may have been sent together with
    /// hyrun's own (scancel, a step cancel): the verdict waits briefly (`verdict_due`) for
    /// hyrun's signal, which excuses it.
    kEndPending,
    kEnded,  ///< ended and judged
  };
  struct Rank {
    int global_rank = 0;
    int local_rank = 0;
    pid_t pid = 0;
    ProcessGroup group;  // signalled only while known to be this rank's
    int incarnation = 0;
    ControlChannel control;
    RankState state = RankState::kRunning;
    std::chrono::steady_clock::time_point verdict_due{};  // kEndPending only
    std::optional<PlannedExit> planned;                   // the end the rank announced: only that end is excused
    bool handles_deaths = false;                          // asked to be told of other ranks' deaths
    ProcessEnd end{};
    bool alive() const { return state == RankState::kRunning || state == RankState::kSuspended; }
  };

  void start_process(RankLaunch launch);
  void poll_once(std::chrono::steady_clock::time_point deadline);
  void on_signals();
  void reap_children();
  void on_rank_exit(Rank& rank, int wait_status);
  void on_rank_stopped(Rank& rank, int signal);
  /// How the rank ended, in words, with what it had announced when that was something else.
  static std::string describe_end(const Rank& rank);
  /// `how` completes "rank R (pid P) ..."; `exit_code` overrides the rank's own.
  void report_failure(const Rank& rank, const std::string& how, std::optional<int> exit_code = {});
  /// The rank whose end awaits its verdict (at most one at a time), or nullptr.
  Rank* pending_verdict();
  void settle_verdict(Rank& rank);
  void on_publish_readable();
  void on_control_readable(Rank& rank);
  /// Tells every running local rank that handles deaths, but `dead` itself, that the
  /// current process of global rank `dead` has ended.
  void tell_death(int dead);
  /// `rank` asked to be told of deaths: first of those that happened before.
  void on_handles_deaths(Rank& rank);
  void respawn(int local_rank, int global_rank, int incarnation);
  void start_requested_ranks();
  void signal_running(int signal);
  void kill_all_groups();
  void kill_adopted_orphans();
  void fail_bootstrap(const std::string& message, int exit_code);

  Relauncher relauncher_;
  RankStarter starter_;
  std::vector<int> requested_starts_;  // from rank 0, started after the poll round
  std::vector<PollParticipant*> participants_;
  const SupervisorOptions options_;
  SignalEvents& signals_;
  OutputForwarder output_;
  InputForwarder input_;
  std::vector<Rank> ranks_;
  std::vector<int> remote_dead_;  // global ranks of lost nodes (report_remote_deaths)

  PublishChannel publish_;
  bool awaiting_address_ = false;  // rank 0's end is then reported as a bootstrap failure

  std::optional<int> job_exit_code_;
  std::optional<std::string> failure_summary_;
  bool stopping_ = false;
  std::optional<int> stop_signal_;
  bool killed_ = false;
  int interrupts_ = 0;
  std::chrono::steady_clock::time_point kill_deadline_{};
};

}  // namespace hyrun
