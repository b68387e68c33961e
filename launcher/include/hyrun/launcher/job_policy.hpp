#pragma once
// The job's policy on its rank processes (docs/architecture.md, "Elastic jobs" and
// docs/cli.md, "Failures"): which end is planned and which fails the job, when a rank is
// restarted, which exit code the job ends with, and who hears of a death. It only decides:
// the rank supervisor (rank_supervisor.hpp) acts, through the process mechanics
// (hyrun/process/rank_processes.hpp). The policy of elastic agents such as
// torch.distributed.elastic is kept apart from their process handling the same way.
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hyrun/launcher/job_result.hpp"
#include "hyrun/process/rank_processes.hpp"

namespace hyrun {

/// What an end (or a stop) of one rank process means for the job.
struct Verdict {
  enum class Kind {
    kAsAnnounced,  ///< the planned end the rank announced: no failure
    kRestart,      ///< as announced, and the rank asked to be restarted (within --max-restarts)
    kBootstrap,    ///< rank 0 ended while its address is awaited: the bootstrap reports it
    kNoFailure,    ///< a clean end, or one after the job's verdict was made: nothing to do
    kPending,      ///< killed by a terminating signal: judged after kSignalSettle (defer())
    kSuspended,    ///< stopped by a signal: the job waits for its SIGCONT
    kUnread,       ///< would fail for want of a finalize that may still be unread: judged again once read
    kFailure,      ///< the job fails: fail() with `how` and `exit_code`
  };
  // A constructor, so that a verdict names only what it has (no missing-initializer warnings).
  Verdict(Kind kind = Kind::kNoFailure, std::string how = {}, std::optional<int> exit_code = {}, bool announced = false)
      : kind(kind), how(std::move(how)), exit_code(exit_code), announced(announced) {}

  Kind kind;
  std::string how;               ///< completes "rank R (pid P) ..." (kFailure)
  std::optional<int> exit_code;  ///< the job's, when not the rank's own (kFailure)
  bool announced;                ///< the end is the one the rank announced (also over --max-restarts)
};

/// What the job is doing when an end is judged.
struct JudgedMoment {
  bool stopping = false;          ///< the job is ending: no restarts
  bool awaiting_address = false;  ///< rank 0's address is awaited (its end is the bootstrap's)
  /// "stdout" or "stderr" when that output of hyrun lost its reader (a SIGPIPE's cause), else "".
  std::string lost_reader;
  /// hyrun's PMIx server has not read the rank's connection to its end yet: a PMIx_Finalize
  /// the rank sent before it ended may be unread (a busy or stopped server thread).
  bool goodbye_unread = false;
};

class JobPolicy {
 public:
  /// How long a rank killed by SIGTERM/SIGINT/SIGHUP/SIGKILL waits for its verdict: the
  /// signal may have come together with hyrun's own (scancel, a step cancel, a PMIx
  /// abort), which then excuses it.
  static constexpr auto kSignalSettle = std::chrono::milliseconds(250);

  /// `max_restarts`: --max-restarts, the restarts each rank may ask for.
  explicit JobPolicy(int max_restarts) : max_restarts_(max_restarts) {}

  /// Judges the end of `rank` (its `end` and announcement recorded). Only the end the rank
  /// announced is excused; a rank that asks for a restart over --max-restarts fails the job.
  Verdict judge_end(const RankProcess& rank, const JudgedMoment& now) const;
  /// Judges a rank stopped by `signal`: SIGTTIN/SIGTTOU (the terminal from a background
  /// group: nothing will continue it) fails the job, any other stop is a pause.
  Verdict judge_stop(int signal, bool stopping) const;

  /// Records a rank's failure: the job's exit code when none is set yet (`exit_code`, else
  /// the rank's own), and the line that names it. Returns that line, "rank R (pid P) how".
  const std::string& fail(const RankProcess& rank, const std::string& how, std::optional<int> exit_code = {});

  /// Defers the verdict on process `process` (a kPending end) until `due`.
  void defer(std::size_t process, std::chrono::steady_clock::time_point due);
  /// The process whose end awaits its verdict (at most one at a time).
  std::optional<std::size_t> pending() const { return pending_; }
  std::chrono::steady_clock::time_point pending_due() const { return pending_due_; }
  /// Settles the pending verdict: a failure (true) unless the job's verdict came meanwhile
  /// (hyrun's own signal: the end was part of it).
  bool settle();

  /// A signal to hyrun that stops the job (SIGINT, SIGTERM, SIGHUP): the job's status is
  /// 128 + signal unless already decided; the first such signal is kept.
  void on_stop_signal(int signal);
  /// The job's exit code, unless one is already set (the first cause wins).
  void set_exit_code(int code);
  /// The job's exit code, whatever was set (a bootstrap failure, reported by its own error).
  void force_exit_code(int code) { exit_code_ = code; }
  std::optional<int> exit_code() const { return exit_code_; }
  JobResult result() const { return JobResult{exit_code_.value_or(0), stop_signal_, failure_}; }

  /// Another node was lost: global ranks [first, first + count) are dead.
  void add_remote_deaths(int first, int count);
  /// The deaths a rank that asks to hear of deaths is told of first: the lost nodes' ranks,
  /// and each local rank whose latest process has ended.
  std::vector<int> deaths_so_far(const std::vector<RankProcess>& processes) const;
  /// Whether `listener` hears of the death of global rank `dead` (a running process that
  /// handles deaths, of another rank).
  static bool hears_death(const RankProcess& listener, int dead);
  /// True when every rank process started so far handles deaths (an elastic program, which
  /// may go on when another node is lost); false before any has started.
  static bool all_handle_deaths(const std::vector<RankProcess>& processes);

  /// Orders ends reaped in one batch for judgement: those killed by a terminating signal
  /// first. waitpid returns zombies oldest child first, not in the order they died, and a
  /// rank killed from outside must not lose to its own fallout (a peer exiting 1 because it
  /// died) just because hyrun was not scheduled in between.
  static void order_for_judgement(std::vector<ProcessEvent>& ends);
  /// How the rank ended, in words, with what it had announced when that was something else.
  static std::string describe_end(const RankProcess& rank);

 private:
  const int max_restarts_;
  std::optional<int> exit_code_;
  std::optional<int> stop_signal_;
  std::optional<std::string> failure_;
  std::optional<std::size_t> pending_;
  std::chrono::steady_clock::time_point pending_due_{};
  std::vector<int> remote_dead_;
};

}  // namespace hyrun
