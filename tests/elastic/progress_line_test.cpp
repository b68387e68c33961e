// The progress line shows only to people at a terminal (directly, or through hyrun), so it
// never reaches a log CloudAI parses.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

#include "hyrun/ep/report/progress_line.hpp"

namespace hyrun::ep::report {
namespace {

// Each test writes through a ProgressLine into a fresh temporary file (never a terminal)
// and reads back what reached it.
class ProgressLineFile : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(f_, nullptr); }
  void TearDown() override {
    if (f_ != nullptr) std::fclose(f_);
  }
  std::string contents() {
    std::fflush(f_);
    std::rewind(f_);
    std::string out;
    for (int c; (c = std::fgetc(f_)) != EOF;) out += static_cast<char>(c);
    return out;
  }

  std::FILE* f_ = std::tmpfile();
};

TEST_F(ProgressLineFile, SilentWhenNotATerminal) {
  {
    ProgressLine progress(f_);  // a regular file is not a terminal
    EXPECT_FALSE(progress.enabled());
    progress.update(0, 4, "4 ranks joining");
    progress.clear();
  }
  EXPECT_EQ(contents(), "");
}

TEST_F(ProgressLineFile, RewritesOneLineOnATerminal) {
  {
    ProgressLine progress(f_, ProgressLine::Mode::kInPlace);
    progress.update(0, 4);
    progress.update(1, 4, "4 ranks joining");
  }  // the destructor erases the line
  EXPECT_EQ(contents(), "\r\x1b[Kphase 1 of 4\r\x1b[Kphase 2 of 4: 4 ranks joining\r\x1b[K");
}

TEST_F(ProgressLineFile, WholeLinesWhenHyrunsOutputIsATerminal) {
  {
    ProgressLine progress(f_, ProgressLine::Mode::kLines);
    progress.update(0, 2);
    progress.update(1, 2, "plan 1 of 1");
    progress.clear();
  }  // nothing to erase: hyrun forwarded whole lines
  EXPECT_EQ(contents(), "phase 1 of 2\nphase 2 of 2: plan 1 of 1\n");
}

TEST_F(ProgressLineFile, DetectsHyrunsTerminalOnlyForStdout) {
  ::setenv("HYRUN_OUTPUT_TERMINAL", "1", 1);
  EXPECT_EQ(ProgressLine(f_).mode(), ProgressLine::Mode::kOff);  // a file of the rank's own
  if (::isatty(STDOUT_FILENO) != 1) {
    EXPECT_EQ(ProgressLine(stdout).mode(), ProgressLine::Mode::kLines);
  }
  ::setenv("HYRUN_OUTPUT_TERMINAL", "0", 1);
  if (::isatty(STDOUT_FILENO) != 1) {
    EXPECT_EQ(ProgressLine(stdout).mode(), ProgressLine::Mode::kOff);
  }
  ::unsetenv("HYRUN_OUTPUT_TERMINAL");
}

}  // namespace
}  // namespace hyrun::ep::report
