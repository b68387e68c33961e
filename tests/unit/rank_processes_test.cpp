// The process mechanics of the rank supervisor, with real children: a started rank is
// reaped and its status reported, its whole process group is signalled (also after its
// leader ended), and a stopped rank is seen and acts on a stop once continued.
#include "hyrun/process/rank_processes.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace hyrun {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPatience = std::chrono::seconds(20);  // generous: the suite also runs under a CPU hog

RankLaunch launch_of(int global_rank) {
  RankLaunch launch;
  launch.global_rank = global_rank;
  launch.local_rank = global_rank;
  launch.environment = {"PATH=/usr/bin:/bin"};
  return launch;
}

RankProcesses processes_running(const std::string& script, const std::string& argument = "sh") {
  return RankProcesses({"/bin/sh", "-c", script, argument}, false, false, "");
}

// Reaps until an event for `process` of `kind` comes (or the patience ends).
std::optional<ProcessEvent> await_event(RankProcesses& processes, std::size_t process, ProcessEvent::Kind kind) {
  const auto until = Clock::now() + kPatience;
  while (Clock::now() < until) {
    for (const auto& event : processes.reap())
      if (event.process == process && event.kind == kind) return event;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return std::nullopt;
}

// The pid a script wrote to `path`, once it is there.
pid_t pid_written_to(const std::filesystem::path& path) {
  const auto until = Clock::now() + kPatience;
  while (Clock::now() < until) {
    pid_t pid = 0;
    if (std::ifstream in(path); in >> pid && pid > 0) return pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return 0;
}

// Whether `pid` is gone, reaping adopted orphans meanwhile (this test is their subreaper).
bool gone(RankProcesses& processes, pid_t pid) {
  const auto until = Clock::now() + kPatience;
  while (Clock::now() < until) {
    processes.reap();
    if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

class RankProcessesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // As hyrun is (prepare_launcher_process): a rank's orphaned children come back to us.
    ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    dir_ = std::filesystem::temp_directory_path() / ("rank_processes_test." + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(RankProcessesTest, AStartedRankIsReapedAndItsStatusReported) {
  RankProcesses processes = processes_running("exit 7");
  const std::size_t index = processes.start(launch_of(1));
  EXPECT_EQ(processes.running_count(), 1);
  const auto ended = await_event(processes, index, ProcessEvent::Kind::kEnded);
  ASSERT_TRUE(ended) << "the rank's end was never reaped";
  ASSERT_TRUE(WIFEXITED(ended->status));
  EXPECT_EQ(WEXITSTATUS(ended->status), 7);
  EXPECT_TRUE(processes.all()[index].alive()) << "an end is the policy's to judge before it is recorded";
  processes.record_end(index, ended->status);
  EXPECT_EQ(processes.running_count(), 0);
  EXPECT_EQ(processes.all()[index].end.exit_code(), 7);
  EXPECT_EQ(processes.latest(1), &processes.all()[index]);
  EXPECT_EQ(processes.latest(2), nullptr);
}

// SLURM_TASK_PID as slurmstepd sets it: each process's own pid, in place of an inherited one.
TEST_F(RankProcessesTest, ThePidVariableIsEachProcesssOwnPid) {
  RankProcesses processes = processes_running("[ \"$TASK_PID\" = \"$$\" ] && exit 3; exit 4");
  for (const bool inherited : {false, true}) {
    RankLaunch launch = launch_of(1);
    launch.own_pid_variable = "TASK_PID";
    if (inherited) launch.environment.push_back("TASK_PID=1");  // hyrun's own, replaced
    const std::size_t index = processes.start(launch);
    const auto ended = await_event(processes, index, ProcessEvent::Kind::kEnded);
    ASSERT_TRUE(ended);
    processes.record_end(index, ended->status);
    EXPECT_EQ(WEXITSTATUS(ended->status), 3) << "TASK_PID was not the process's pid (inherited: " << inherited << ")";
  }
}

TEST_F(RankProcessesTest, AStopReachesTheRanksWholeProcessGroup) {
  const auto pid_file = dir_ / "child";
  RankProcesses processes = processes_running("sleep 60 & echo $! > \"$0\"; wait", pid_file.string());
  const std::size_t index = processes.start(launch_of(0));
  const pid_t grandchild = pid_written_to(pid_file);
  ASSERT_GT(grandchild, 0) << "the rank never said its child's pid";
  processes.signal_running(SIGTERM);
  const auto ended = await_event(processes, index, ProcessEvent::Kind::kEnded);
  ASSERT_TRUE(ended);
  EXPECT_TRUE(WIFSIGNALED(ended->status) && WTERMSIG(ended->status) == SIGTERM);
  EXPECT_TRUE(gone(processes, grandchild)) << "the rank's own child survived the signal to its group";
}

TEST_F(RankProcessesTest, KillingTheGroupsReachesChildrenOfARankThatEnded) {
  const auto pid_file = dir_ / "child";
  RankProcesses processes = processes_running("sleep 60 & echo $! > \"$0\"", pid_file.string());
  const std::size_t index = processes.start(launch_of(0));
  const pid_t grandchild = pid_written_to(pid_file);
  ASSERT_GT(grandchild, 0);
  const auto ended = await_event(processes, index, ProcessEvent::Kind::kEnded);
  ASSERT_TRUE(ended);
  processes.record_end(index, ended->status);
  ASSERT_EQ(::kill(grandchild, 0), 0) << "the leftover should still run before the kill";
  processes.kill_all_groups();
  EXPECT_TRUE(gone(processes, grandchild)) << "a leftover in an ended rank's group survived";
}

TEST_F(RankProcessesTest, AStoppedRankIsSeenAndActsOnAStopOnceContinued) {
  RankProcesses processes = processes_running("kill -STOP $$; exit 0");
  const std::size_t index = processes.start(launch_of(0));
  const auto stopped = await_event(processes, index, ProcessEvent::Kind::kStopped);
  ASSERT_TRUE(stopped) << "the stop was never seen";
  EXPECT_EQ(stopped->status, SIGSTOP);
  EXPECT_EQ(processes.all()[index].state, ProcessState::kSuspended);
  EXPECT_EQ(processes.running_count(), 1) << "a suspended rank still holds the job";
  processes.signal_running(SIGTERM);  // SIGCONT follows, or the stopped rank would never act on it
  const auto ended = await_event(processes, index, ProcessEvent::Kind::kEnded);
  ASSERT_TRUE(ended);
  EXPECT_TRUE(WIFSIGNALED(ended->status) && WTERMSIG(ended->status) == SIGTERM);
}

TEST_F(RankProcessesTest, NothingOutlivesTheMechanics) {
  const auto pid_file = dir_ / "child";
  pid_t rank = 0;
  {
    RankProcesses processes = processes_running("sleep 60 & echo $! > \"$0\"; wait", pid_file.string());
    processes.start(launch_of(0));
    rank = processes.all()[0].pid;
    ASSERT_GT(pid_written_to(pid_file), 0);
  }
  int status = 0;
  EXPECT_EQ(::waitpid(rank, &status, WNOHANG), -1) << "the rank was not reaped by the destructor";
  EXPECT_EQ(errno, ECHILD);
}

}  // namespace
}  // namespace hyrun
