// MpsDaemon's lifecycle (launcher/mps_daemon.hpp) with a stand-in for
// nvidia-cuda-mps-control written here (CI has no NVIDIA driver): it keeps the real
// program's contract (-d daemonizes and creates $CUDA_MPS_PIPE_DIRECTORY/control; a
// client reads "quit" on stdin and ends the daemon). The real daemon is started by hyrun
// on the H100 (bench/h100-session.sh, docs/performance.md).
#include "hyrun/launcher/mps_daemon.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "hyrun/common/error.hpp"

namespace {

namespace fs = std::filesystem;

class MpsDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hyrun-mps-daemon-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    ::setenv("TMPDIR", dir_.c_str(), 1);
    ::setenv("STANDIN_GOT", (dir_ / "got").c_str(), 1);  // what the stand-in daemon was told
  }
  void TearDown() override {
    ::unsetenv("TMPDIR");
    ::unsetenv("STANDIN_GOT");
    fs::remove_all(dir_);
  }
  std::string script(const std::string& name, const std::string& body) {
    const auto p = dir_ / name;
    std::ofstream(p) << "#!/bin/sh\n" << body;
    fs::permissions(p, fs::perms::owner_all);
    return p.string();
  }
  /// Where PrivateDirectory makes this user's directories under TMPDIR.
  fs::path home() const { return dir_ / ("hyrun-" + std::to_string(::geteuid())); }
  /// Private directories MpsDaemon made under TMPDIR.
  int private_dirs() const {
    int n = 0;
    if (!fs::exists(home())) return 0;
    for (const auto& e : fs::directory_iterator(home())) n += e.path().filename().string().starts_with("hyrun-mps-");
    return n;
  }
  fs::path dir_;
};

constexpr const char* kStandIn = R"(
if [ "$1" = -d ]; then
  mkfifo "$CUDA_MPS_PIPE_DIRECTORY/control" || exit 1
  ( read cmd <"$CUDA_MPS_PIPE_DIRECTORY/control"; echo "$cmd" >"$STANDIN_GOT"; rm -f "$CUDA_MPS_PIPE_DIRECTORY/control" ) </dev/null >/dev/null 2>&1 &
  exit 0
fi
read cmd && echo "$cmd" >"$CUDA_MPS_PIPE_DIRECTORY/control"
)";

TEST_F(MpsDaemonTest, StartsWithPrivateDirectoriesAndQuitsAndCleansUp) {
  const auto control = script("control", kStandIn);
  std::string pipe_dir;
  {
    auto d = hyrun::MpsDaemon::start(control, std::chrono::seconds(5));
    pipe_dir = d->pipe_directory();
    EXPECT_TRUE(pipe_dir.starts_with(home().string() + "/hyrun-mps-")) << pipe_dir;
    EXPECT_TRUE(fs::exists(fs::path(pipe_dir) / "control"));
    const auto env = d->client_environment();
    ASSERT_EQ(env.size(), 2u);
    EXPECT_EQ(env[0].first, "CUDA_MPS_PIPE_DIRECTORY");
    EXPECT_EQ(env[0].second, pipe_dir);
    EXPECT_EQ(env[1].first, "CUDA_MPS_LOG_DIRECTORY");
  }
  // The destructor said "quit" through the control program (the daemon got it and ended),
  // and removed the directory.
  std::string got;
  for (int i = 0; i < 400 && got.empty(); ++i) {
    std::ifstream(dir_ / "got") >> got;
    if (got.empty()) ::usleep(5000);
  }
  EXPECT_EQ(got, "quit");
  EXPECT_FALSE(fs::exists(pipe_dir));
  EXPECT_EQ(private_dirs(), 0);
}

TEST_F(MpsDaemonTest, AControlProgramThatFailsIsNamedAndNothingIsLeft) {
  const auto control = script("control", "exit 3\n");
  try {
    hyrun::MpsDaemon::start(control, std::chrono::seconds(5));
    FAIL() << "no error";
  } catch (const hyrun::Error& e) {
    EXPECT_NE(std::string(e.what()).find(control), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("exited with code 3"), std::string::npos) << e.what();
  }
  EXPECT_EQ(private_dirs(), 0);
}

TEST_F(MpsDaemonTest, APipeThatNeverAppearsEndsWithinTheTimeLimit) {
  const auto control = script("control", "exit 0\n");
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(hyrun::MpsDaemon::start(control, std::chrono::milliseconds(300)), hyrun::Error);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));  // a hang guard, not a timing claim
  EXPECT_EQ(private_dirs(), 0);
}

TEST_F(MpsDaemonTest, AMissingProgramIsASpawnError) {
  EXPECT_THROW(hyrun::MpsDaemon::start((dir_ / "no-such-control").string(), std::chrono::seconds(1)), hyrun::Error);
  EXPECT_EQ(private_dirs(), 0);
}

}  // namespace
