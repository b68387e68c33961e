#include "hyrun/common/planned_exit.hpp"

#include <gtest/gtest.h>
#include <signal.h>

namespace hyrun {
namespace {

// waitpid statuses, built as the kernel reports them.
int exited(int code) { return (code & 0xff) << 8; }
int killed_by(int signal) { return signal & 0x7f; }

TEST(PlannedExit, RoundTripsThroughTheControlMessage) {
  for (const PlannedExit& p : {PlannedExit{false, 0, 0}, PlannedExit{true, 42, 0}, PlannedExit{true, 0, SIGKILL},
                               PlannedExit{false, 0, 64}, PlannedExit{false, 255, 0}}) {
    const auto parsed = parse_planned_exit(format_planned_exit(p));
    ASSERT_TRUE(parsed) << format_planned_exit(p);
    EXPECT_EQ(*parsed, p);
  }
  EXPECT_EQ(format_planned_exit({true, 0, SIGKILL}), "planned-exit v2 respawn=1 signal=9");
}

TEST(PlannedExit, RejectsMalformedOrOldMessages) {
  for (const char* bad : {"planned-exit respawn=1", "planned-exit v2 respawn=2 exit=0", "planned-exit v2 respawn=1",
                          "planned-exit v2 respawn=1 exit=256", "planned-exit v2 respawn=1 exit=-1",
                          "planned-exit v2 respawn=1 signal=0", "planned-exit v2 respawn=1 signal=65",
                          "planned-exit v2 respawn=1 exit=3x", "planned-exit v2 respawn=0 exit=", ""})
    EXPECT_FALSE(parse_planned_exit(bad)) << bad;
}

TEST(PlannedExit, CoversOnlyTheAnnouncedEnd) {
  const PlannedExit exit0{false, 0, 0};
  EXPECT_TRUE(exit0.matches(exited(0)));
  EXPECT_FALSE(exit0.matches(exited(42)));
  EXPECT_FALSE(exit0.matches(killed_by(SIGKILL)));
  const PlannedExit kill{true, 0, SIGKILL};
  EXPECT_TRUE(kill.matches(killed_by(SIGKILL)));
  EXPECT_FALSE(kill.matches(killed_by(SIGSEGV)));
  EXPECT_FALSE(kill.matches(exited(0)));
  EXPECT_EQ(kill.describe(), "death by signal 9 (SIGKILL)");
  EXPECT_EQ(PlannedExit({false, 3, 0}).describe(), "exit with code 3");
}

}  // namespace
}  // namespace hyrun
