// --timings' CPU times (launch_timings.hpp): another process's CPU time to well under a
// millisecond, as the node's PMIx client helper's (a few ms a launch) needs.
#include "hyrun/launcher/launch_timings.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>

namespace hyrun {
namespace {

// This process's CPU time in microseconds, from its own clock.
std::uint64_t self_cpu_us() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<std::uint64_t>(t.tv_sec) * 1000000 + static_cast<std::uint64_t>(t.tv_nsec) / 1000;
}

TEST(LaunchTimings, AnotherProcessesCpuTimeIsReadBelowAClockTick) {
  // A child that spins for 6.5 ms of CPU, says so, and waits: /proc's utime and stime, in
  // clock ticks of 10 ms, say 0 for it.
  constexpr std::uint64_t kSpin = 6500;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    const std::uint64_t start = self_cpu_us();
    while (self_cpu_us() - start < kSpin) {
    }
    const char done = 1;
    (void)!::write(ready[1], &done, 1);
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char done = 0;
  ASSERT_EQ(::read(ready[0], &done, 1), 1);
  ::close(ready[0]);
  const auto cpu = process_cpu_us(child);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ASSERT_TRUE(cpu.has_value());
  EXPECT_GE(*cpu, kSpin);
  EXPECT_LT(*cpu, kSpin + 500000) << "more than the child can have spent";
}

TEST(LaunchTimings, AProcessThatIsGoneHasNoCpuTime) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  EXPECT_FALSE(process_cpu_us(child).has_value());
}

}  // namespace
}  // namespace hyrun
