// The staged launch's token file: what a later launch reads back, and what it refuses at
// once instead of waiting on (a FIFO planted at the file's path).
#include "token_file.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include "hyrun/common/error.hpp"

namespace hyrun::ep::elastic {
namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char name[] = "/tmp/token-file-test.XXXXXX";
    path = ::mkdtemp(name);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

TEST(TokenFile, WrittenThenReadBack) {
  TempDir dir;
  const std::string path = dir.path + "/token";
  write_token_file(path, "abc123");
  EXPECT_EQ(read_token_file(path), "abc123");
  remove_token_file(path, "abc123");
  EXPECT_FALSE(std::filesystem::exists(path));
}

// Runs `body` in a child; returns its exit status, or -1 when it did not end within `limit`
// (it is killed then): a test that hangs fails instead of holding the suite.
int in_child_within(const std::function<int()>& body, std::chrono::milliseconds limit) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(body());
  const auto end = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= end) {
      ::kill(child, SIGKILL);
      ::waitpid(child, nullptr, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(TokenFile, AFifoAtItsPathIsRefusedAtOnceNotWaitedOn) {
  TempDir dir;
  const std::string path = dir.path + "/token";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  const int rc = in_child_within(
      [&] {
        try {
          read_token_file(path);
          return 1;  // a FIFO read as a token
        } catch (const UsageError& e) {
          const std::string what = e.what();
          return what.find(path) != std::string::npos && what.find("not a regular file") != std::string::npos ? 0 : 2;
        } catch (...) {
          return 3;
        }
      },
      std::chrono::seconds(5));
  EXPECT_EQ(rc, 0) << "-1: read_token_file hung in open() on the FIFO; 1: read it; 2: the error names no path or "
                      "problem; 3: another exception";
  // Removing the token at the end of a run does not hang on it either, and leaves it alone
  // (docs/security.md: "the first launch's clean-up leaves it alone").
  EXPECT_EQ(in_child_within([&] { return remove_token_file(path, "x"), 0; }, std::chrono::seconds(5)), 0);
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0) << "the clean-up removed the FIFO";
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

// docs/security.md: the token file is opened with O_NOFOLLOW: a link planted at its path
// (here to a valid token file of the user's) is refused, naming the path, and the clean-up
// removes neither the link nor what it leads to.
TEST(TokenFile, ALinkAtItsPathIsRefusedNamingThePath) {
  TempDir dir;
  const std::string target = dir.path + "/elsewhere";
  const std::string path = dir.path + "/token";
  write_token_file(target, "abc123");
  ASSERT_EQ(::symlink(target.c_str(), path.c_str()), 0);
  try {
    read_token_file(path);
    ADD_FAILURE() << "a token read through a link";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'" + path + "'"), std::string::npos) << e.what();
  }
  remove_token_file(path, "abc123");
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << "the clean-up removed the link";
  EXPECT_EQ(read_token_file(target), "abc123") << "the clean-up removed the file the link leads to";
}

}  // namespace
}  // namespace hyrun::ep::elastic
