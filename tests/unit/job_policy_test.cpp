// The job's policy on its rank processes: which end fails the job and with which exit code,
// which end is planned, when a rank is restarted, and who hears of a death. Wait statuses
// come from real children (as in wait_status_test.cpp), not hand-made bit patterns.
#include "hyrun/launcher/job_policy.hpp"

#include "hyrun/common/error.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace hyrun {
namespace {

int exit_status(int code) {
  const pid_t pid = fork();
  if (pid == 0) _exit(code);
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

int signal_status(int signal) {
  const pid_t pid = fork();
  if (pid == 0) {
    ::signal(signal, SIG_DFL);
    raise(signal);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

JudgedMoment stopping() {
  JudgedMoment now;
  now.stopping = true;
  return now;
}

JudgedMoment awaiting_address() {
  JudgedMoment now;
  now.awaiting_address = true;
  return now;
}

RankProcess ended(int global_rank, pid_t pid, int wait_status) {
  RankProcess rank;
  rank.global_rank = global_rank;
  rank.pid = pid;
  rank.state = ProcessState::kEnded;
  rank.end.wait_status = wait_status;
  return rank;
}

TEST(JobPolicy, AnUnplannedDeathFailsTheJobWithItsExitCodeAndNamesTheRank) {
  JobPolicy policy(32);
  const RankProcess rank = ended(5, 1234, exit_status(3));
  const Verdict verdict = policy.judge_end(rank, {});
  ASSERT_EQ(verdict.kind, Verdict::Kind::kFailure);
  EXPECT_FALSE(verdict.announced);
  EXPECT_EQ(policy.fail(rank, verdict.how, verdict.exit_code), "rank 5 (pid 1234) exited with code 3");
  const JobResult result = policy.result();
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_EQ(result.rank_failure, "rank 5 (pid 1234) exited with code 3");
  EXPECT_FALSE(result.stop_signal);
}

TEST(JobPolicy, TheFirstFailureDecidesTheExitCode) {
  JobPolicy policy(32);
  const RankProcess first = ended(1, 10, exit_status(3));
  policy.fail(first, policy.judge_end(first, {}).how);
  const RankProcess second = ended(2, 11, exit_status(7));
  EXPECT_EQ(policy.judge_end(second, {}).kind, Verdict::Kind::kNoFailure) << "its fallout is no second verdict";
  EXPECT_EQ(policy.result().exit_code, 3);
}

TEST(JobPolicy, APlannedKillIsNoFailure) {
  JobPolicy policy(32);
  RankProcess rank = ended(2, 99, signal_status(SIGKILL));
  rank.planned = PlannedExit{false, 0, SIGKILL};
  const Verdict verdict = policy.judge_end(rank, {});
  EXPECT_EQ(verdict.kind, Verdict::Kind::kAsAnnounced);
  EXPECT_TRUE(verdict.announced);
  EXPECT_EQ(policy.result().exit_code, 0);
  EXPECT_FALSE(policy.result().rank_failure);
}

TEST(JobPolicy, AnEndOtherThanTheAnnouncedOneFailsAndSaysWhatWasAnnounced) {
  JobPolicy policy(32);
  RankProcess rank = ended(2, 99, exit_status(42));
  rank.planned = PlannedExit{false, 0, 0};
  const Verdict verdict = policy.judge_end(rank, {});
  ASSERT_EQ(verdict.kind, Verdict::Kind::kFailure);
  EXPECT_EQ(verdict.how, "exited with code 42 after announcing a planned exit with code 0");
}

TEST(JobPolicy, APlannedExitAskingForRespawnRestartsTheRankUntilMaxRestarts) {
  JobPolicy policy(2);
  RankProcess rank = ended(3, 50, signal_status(SIGKILL));
  rank.planned = PlannedExit{true, 0, SIGKILL};
  rank.incarnation = 1;
  EXPECT_EQ(policy.judge_end(rank, {}).kind, Verdict::Kind::kRestart);
  EXPECT_EQ(policy.judge_end(rank, stopping()).kind, Verdict::Kind::kAsAnnounced) << "a stopping job restarts no one";
  rank.incarnation = 2;
  const Verdict over = policy.judge_end(rank, {});
  ASSERT_EQ(over.kind, Verdict::Kind::kFailure);
  EXPECT_NE(over.how.find("over --max-restarts 2 (restarted 2 times)"), std::string::npos) << over.how;
  EXPECT_EQ(over.exit_code, 137);
}

TEST(JobPolicy, ADeathByATerminatingSignalWaitsForItsVerdict) {
  JobPolicy policy(32);
  const RankProcess rank = ended(4, 77, signal_status(SIGTERM));
  ASSERT_EQ(policy.judge_end(rank, {}).kind, Verdict::Kind::kPending);
  policy.defer(0, std::chrono::steady_clock::now());
  ASSERT_EQ(policy.pending(), 0u);
  EXPECT_EQ(policy.judge_end(ended(5, 78, exit_status(1)), {}).kind, Verdict::Kind::kNoFailure)
      << "one verdict waits at a time; later ends are its fallout";
  EXPECT_TRUE(policy.settle()) << "no signal reached hyrun meanwhile: a real failure";
  EXPECT_FALSE(policy.pending());
}

TEST(JobPolicy, HyrunsOwnStopSignalExcusesAPendingDeath) {
  JobPolicy policy(32);
  const RankProcess rank = ended(4, 77, signal_status(SIGTERM));
  ASSERT_EQ(policy.judge_end(rank, {}).kind, Verdict::Kind::kPending);
  policy.defer(0, std::chrono::steady_clock::now());
  policy.on_stop_signal(SIGTERM);
  EXPECT_FALSE(policy.settle());
  const JobResult result = policy.result();
  EXPECT_EQ(result.exit_code, 128 + SIGTERM);
  EXPECT_EQ(result.stop_signal, SIGTERM);
  EXPECT_FALSE(result.rank_failure);
}

TEST(JobPolicy, ASigpipeAfterHyrunsReaderWentAwaySaysSo) {
  JobPolicy policy(32);
  JudgedMoment now;
  now.lost_reader = "stdout";
  const Verdict verdict = policy.judge_end(ended(0, 5, signal_status(SIGPIPE)), now);
  ASSERT_EQ(verdict.kind, Verdict::Kind::kFailure);
  EXPECT_NE(verdict.how.find("after the reader of hyrun's stdout went away"), std::string::npos) << verdict.how;
}

TEST(JobPolicy, RankZerosEndWhileItsAddressIsAwaitedIsTheBootstraps) {
  JobPolicy policy(32);
  EXPECT_EQ(policy.judge_end(ended(0, 5, exit_status(1)), awaiting_address()).kind, Verdict::Kind::kBootstrap);
  EXPECT_EQ(policy.judge_end(ended(1, 6, exit_status(1)), awaiting_address()).kind, Verdict::Kind::kFailure);
}

TEST(JobPolicy, AStopForTheTerminalFailsTheJobAnyOtherStopIsAPause) {
  JobPolicy policy(32);
  EXPECT_EQ(policy.judge_stop(SIGTSTP, false).kind, Verdict::Kind::kSuspended);
  const Verdict ttin = policy.judge_stop(SIGTTIN, false);
  ASSERT_EQ(ttin.kind, Verdict::Kind::kFailure);
  EXPECT_EQ(ttin.exit_code, 128 + SIGTTIN);
  EXPECT_EQ(policy.judge_stop(SIGTTIN, true).kind, Verdict::Kind::kNoFailure) << "the stop continues it";
}

TEST(JobPolicy, ARankThatSubscribesHearsOfEarlierDeathsOfTheLatestProcessesOnly) {
  JobPolicy policy(32);
  std::vector<RankProcess> processes;
  processes.push_back(ended(1, 10, signal_status(SIGKILL)));  // restarted below: its latest runs
  processes.push_back(ended(2, 11, exit_status(0)));
  RankProcess restarted;
  restarted.global_rank = 1;
  processes.push_back(std::move(restarted));
  policy.add_remote_deaths(8, 2);
  EXPECT_EQ(policy.deaths_so_far(processes), (std::vector<int>{8, 9, 2}));
}

TEST(JobPolicy, OnlyRunningRanksThatHandleDeathsHearOfOthers) {
  RankProcess listener;
  listener.global_rank = 1;
  EXPECT_FALSE(JobPolicy::hears_death(listener, 2)) << "it did not ask (and has no channel)";
  listener.handles_deaths = true;
  EXPECT_FALSE(JobPolicy::hears_death(listener, 2)) << "no control channel to tell it on";
  const UniqueFd rank_end = listener.control.open();
  EXPECT_TRUE(JobPolicy::hears_death(listener, 2));
  EXPECT_FALSE(JobPolicy::hears_death(listener, 1)) << "not of its own death";
  std::vector<RankProcess> processes;
  EXPECT_FALSE(JobPolicy::all_handle_deaths(processes)) << "no rank has started";
  processes.push_back(std::move(listener));
  EXPECT_TRUE(JobPolicy::all_handle_deaths(processes));
  processes.emplace_back();
  EXPECT_FALSE(JobPolicy::all_handle_deaths(processes));
}

TEST(JobPolicy, EndsKilledFromOutsideAreJudgedBeforeTheirFallout) {
  std::vector<ProcessEvent> ends{{0, ProcessEvent::Kind::kEnded, exit_status(1)},
                                 {1, ProcessEvent::Kind::kEnded, signal_status(SIGKILL)},
                                 {2, ProcessEvent::Kind::kEnded, exit_status(2)}};
  JobPolicy::order_for_judgement(ends);
  EXPECT_EQ(ends[0].process, 1u);
  EXPECT_EQ(ends[1].process, 0u);
  EXPECT_EQ(ends[2].process, 2u);
}

}  // namespace
}  // namespace hyrun

namespace hyrun {
namespace {

// MPI's rule, kept by hyrun's PMIx server: a process that initialized PMIx and exits 0
// without finalizing it failed; one that finalized, or never used PMIx, did not.
TEST(JobPolicyPmix, AClientThatExitsZeroWithoutFinalizingFailsTheJob) {
  JobPolicy policy(0);
  RankProcess rank = ended(2, 4321, exit_status(0));
  rank.pmix_connected = true;
  const Verdict verdict = policy.judge_end(rank, JudgedMoment{});
  EXPECT_EQ(verdict.kind, Verdict::Kind::kFailure);
  EXPECT_NE(verdict.how.find("exited 0 without finalizing PMIx (MPI_Finalize"), std::string::npos) << verdict.how;
  ASSERT_TRUE(verdict.exit_code.has_value());
  EXPECT_EQ(*verdict.exit_code, hyrun::exit_code::kLauncherError);

  rank.pmix_finalized = true;
  EXPECT_EQ(policy.judge_end(rank, JudgedMoment{}).kind, Verdict::Kind::kNoFailure);
  RankProcess plain = ended(3, 4322, exit_status(0));
  EXPECT_EQ(policy.judge_end(plain, JudgedMoment{}).kind, Verdict::Kind::kNoFailure);
}

// Its finalize may still be unread in hyrun's PMIx server (libpmix's thread busy or stopped
// when the process was reaped): the end is judged again once the connection is read. Only the
// would-be failure waits; a finalized client, or a failed exit, is judged at once.
TEST(JobPolicyPmix, AnEndWhoseFinalizeMayBeUnreadIsJudgedOnceItIsRead) {
  JobPolicy policy(0);
  JudgedMoment unread;
  unread.goodbye_unread = true;
  RankProcess rank = ended(2, 4321, exit_status(0));
  rank.pmix_connected = true;
  EXPECT_EQ(policy.judge_end(rank, unread).kind, Verdict::Kind::kUnread);
  EXPECT_EQ(policy.judge_end(rank, JudgedMoment{}).kind, Verdict::Kind::kFailure);
  rank.pmix_finalized = true;  // read meanwhile
  EXPECT_EQ(policy.judge_end(rank, JudgedMoment{}).kind, Verdict::Kind::kNoFailure);

  RankProcess failed = ended(3, 4322, exit_status(5));
  failed.pmix_connected = true;
  const Verdict verdict = policy.judge_end(failed, unread);
  EXPECT_EQ(verdict.kind, Verdict::Kind::kFailure);
  EXPECT_NE(verdict.how.find("exited with code 5"), std::string::npos) << verdict.how;
}

TEST(JobPolicyPmix, AClientsEndAfterTheJobFailedIsNoNewFailure) {
  JobPolicy policy(0);
  RankProcess first = ended(0, 100, exit_status(7));
  policy.fail(first, "called MPI_Abort/PMIx_Abort with status 7", 7);
  RankProcess rank = ended(2, 4321, exit_status(0));
  rank.pmix_connected = true;
  EXPECT_EQ(policy.judge_end(rank, stopping()).kind, Verdict::Kind::kNoFailure);
  EXPECT_EQ(policy.result().exit_code, 7);
}

}  // namespace
}  // namespace hyrun
