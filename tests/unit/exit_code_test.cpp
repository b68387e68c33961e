#include <gtest/gtest.h>

#include <climits>

#include "hyrun/common/error.hpp"

namespace hyrun {
namespace {

// A failure's status as an exit code: its low 8 bits as the shell reads them, never 0.
TEST(ExitCode, AFailureStatusNeverReadsAsSuccess) {
  EXPECT_EQ(exit_code::of_failure_status(7), 7);
  EXPECT_EQ(exit_code::of_failure_status(255), 255);
  EXPECT_EQ(exit_code::of_failure_status(0), 1);
  EXPECT_EQ(exit_code::of_failure_status(256), 1);
  EXPECT_EQ(exit_code::of_failure_status(512), 1);
  EXPECT_EQ(exit_code::of_failure_status(INT_MIN), 1);
  EXPECT_EQ(exit_code::of_failure_status(257), 1);
  EXPECT_EQ(exit_code::of_failure_status(263), 7);
  EXPECT_EQ(exit_code::of_failure_status(-1), 255);
  for (int status = -70000; status <= 70000; ++status) {
    const int code = exit_code::of_failure_status(status);
    ASSERT_GE(code, 1) << status;
    ASSERT_LE(code, 255) << status;
    if (status % 256 != 0) ASSERT_EQ(code, status & 0xff) << status;
  }
}

}  // namespace
}  // namespace hyrun
