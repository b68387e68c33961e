// The progress line shows only on terminals, so it never reaches a log CloudAI parses.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "hyrun/ep/bench/progress_line.hpp"

namespace hyrun::ep::bench {
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
    ProgressLine progress(f, true);
    progress.update(0, 4);
    progress.update(1, 4, "4 ranks joining");
  }  // the destructor erases the line
  EXPECT_EQ(contents(f), "\r\x1b[Kphase 1 of 4\r\x1b[Kphase 2 of 4: 4 ranks joining\r\x1b[K");
  std::fclose(f);
}

}  // namespace
}  // namespace hyrun::ep::bench
