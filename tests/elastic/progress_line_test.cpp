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

std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  for (int c; (c = std::fgetc(f)) != EOF;) out += static_cast<char>(c);
  return out;
}

TEST(ProgressLine, SilentWhenNotATerminal) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressLine progress(f);  // a regular file is not a terminal
    EXPECT_FALSE(progress.enabled());
    progress.update(0, 4, "4 ranks joining");
    progress.clear();
  }
  EXPECT_EQ(contents(f), "");
  std::fclose(f);
}

TEST(ProgressLine, RewritesOneLineOnATerminal) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressLine progress(f, ProgressLine::Mode::kInPlace);
    progress.update(0, 4);
    progress.update(1, 4, "4 ranks joining");
  }  // the destructor erases the line
  EXPECT_EQ(contents(f), "\r\x1b[Kphase 1 of 4\r\x1b[Kphase 2 of 4: 4 ranks joining\r\x1b[K");
  std::fclose(f);
}

TEST(ProgressLine, WholeLinesWhenHyrunsOutputIsATerminal) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressLine progress(f, ProgressLine::Mode::kLines);
    progress.update(0, 2);
    progress.update(1, 2, "plan 1 of 1");
    progress.clear();
  }  // nothing to erase: hyrun forwarded whole lines
  EXPECT_EQ(contents(f), "phase 1 of 2\nphase 2 of 2: plan 1 of 1\n");
  std::fclose(f);
}

TEST(ProgressLine, DetectsHyrunsTerminalOnlyForStdout) {
  ::setenv("HYRUN_OUTPUT_TERMINAL", "1", 1);
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(ProgressLine(f).mode(), ProgressLine::Mode::kOff);  // a file of the rank's own
  if (::isatty(STDOUT_FILENO) != 1) {
    EXPECT_EQ(ProgressLine(stdout).mode(), ProgressLine::Mode::kLines);
  }
  ::setenv("HYRUN_OUTPUT_TERMINAL", "0", 1);
  if (::isatty(STDOUT_FILENO) != 1) {
    EXPECT_EQ(ProgressLine(stdout).mode(), ProgressLine::Mode::kOff);
  }
  ::unsetenv("HYRUN_OUTPUT_TERMINAL");
  std::fclose(f);
}

}  // namespace
}  // namespace hyrun::ep::report
