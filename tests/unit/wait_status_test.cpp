#include "hyrun/process/wait_status.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace hyrun {
namespace {

// Real wait statuses from real children, not hand-made bit patterns.
int status_of_child(void (*body)()) {
  const pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(ProcessEnd, NormalExit) {
  const ProcessEnd end{status_of_child([] { _exit(0); })};
  EXPECT_FALSE(end.failed());
  EXPECT_EQ(end.exit_code(), 0);
  EXPECT_EQ(end.describe(), "exited normally");
}

TEST(ProcessEnd, ExitCode) {
  const ProcessEnd end{status_of_child([] { _exit(3); })};
  EXPECT_TRUE(end.failed());
  EXPECT_EQ(end.exit_code(), 3);
  EXPECT_EQ(end.describe(), "exited with code 3");
}

TEST(ProcessEnd, KilledBySignal) {
  const ProcessEnd end{status_of_child([] { raise(SIGKILL); })};
  EXPECT_TRUE(end.failed());
  EXPECT_EQ(end.exit_code(), 137);
  EXPECT_EQ(end.describe(), "was killed by signal 9 (SIGKILL)");
}

TEST(SignalName, NamesAndNumbers) {
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_name(SIGUSR1), "SIGUSR1");
  EXPECT_EQ(signal_name(200), "signal 200");
}

}  // namespace
}  // namespace hyrun
