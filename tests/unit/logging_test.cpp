// The one logging set-up of hyrun and the worker programs: threads of their own (the node
// link's heartbeats, ep-bench's join server) log beside the main thread.
#include "hyrun/common/logging.hpp"

#include <gtest/gtest.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace hyrun {
namespace {

TEST(Logging, TheLoggerIsSafeFromManyThreadsAndKeepsTheirLinesWhole) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  ASSERT_EQ(::dup2(::fileno(file), STDERR_FILENO), STDERR_FILENO);
  init_logging("hyrun", "info");
  // A sink of spdlog's single-threaded kind shares its formatter between threads unlocked.
  const auto& sinks = spdlog::default_logger()->sinks();
  ASSERT_EQ(sinks.size(), 1u);
  EXPECT_NE(std::dynamic_pointer_cast<spdlog::sinks::stderr_sink_mt>(sinks[0]), nullptr)
      << "the default logger's sink is not the thread-safe one";
  constexpr int kLines = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < kLines; ++i) spdlog::info("thread {} line {} {}", t, i, std::string(100 + i % 50, 'x'));
    });
  for (auto& t : threads) t.join();
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::rewind(file);
  const std::regex whole(R"(hyrun: info: thread [0-2] line [0-9]+ x{100,149})");
  int lines = 0;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, file)) {
    std::string line(buffer);
    if (!line.empty() && line.back() == '\n') line.pop_back();
    EXPECT_TRUE(std::regex_match(line, whole)) << line;
    ++lines;
  }
  std::fclose(file);
  EXPECT_EQ(lines, 3 * kLines);
  init_logging("hyrun", "warn");
}

}  // namespace
}  // namespace hyrun
