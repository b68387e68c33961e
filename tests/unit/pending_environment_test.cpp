// The rest of an early-started rank's environment: the file's format (common/) and the
// worker library's side that waits for the file and puts it in the environment.
#include "hyrun/common/pending_environment.hpp"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "hyrun/common/env_contract.hpp"
#include "hyrun/common/error.hpp"
#include "hyrun/common/whole_file.hpp"
#include "pending_environment.hpp"  // the worker library's side (worker/src)
#include "refusal.hpp"

namespace hyrun {
namespace {

using namespace std::chrono_literals;
using test_support::refusal;

std::string random_value(std::mt19937& rng, std::size_t length) {
  // Anything but NUL: '=', newlines, spaces and bytes above 127 included.
  std::uniform_int_distribution<int> byte(1, 255);
  std::string value;
  for (std::size_t i = 0; i < length; ++i) value.push_back(static_cast<char>(byte(rng)));
  return value;
}

TEST(PendingEnvironment, RoundTripsAnyValues) {
  std::mt19937 rng(std::random_device{}());
  for (int round = 0; round < 50; ++round) {
    std::vector<std::string> entries;
    const int count = std::uniform_int_distribution<int>(0, 12)(rng);
    for (int i = 0; i < count; ++i)
      entries.push_back("VAR_" + std::to_string(i) + "=" + random_value(rng, rng() % 200));
    const auto parsed = parse_pending_environment(format_pending_environment(entries));
    ASSERT_TRUE(parsed);
    EXPECT_EQ(*parsed, entries);
  }
}

TEST(PendingEnvironment, RefusesWhatIsNotOne) {
  using namespace std::string_literals;
  for (const std::string bad : {""s, "hyrun-environment v2\0A=1"s, "hyrun-environment v1x"s,
                                "hyrun-environment v1\0NOEQUALS"s, "hyrun-environment v1\0=value"s,
                                "hyrun-environment v1\0"
                                "9LIVES=1"s,
                                "hyrun-environment v1\0A-B=1"s, "rank-died v1 3"s, "hyrun-environment v1\0A=1\0\0B=2"s})
    EXPECT_FALSE(parse_pending_environment(bad)) << bad;
  const std::string big = format_pending_environment({"A=" + std::string(kMaxPendingEnvironmentBytes, 'x')});
  EXPECT_FALSE(parse_pending_environment(big)) << "over the limit";
  EXPECT_TRUE(parse_pending_environment(format_pending_environment({})));
}

// A rank's contract in the environment as hyrun gives it to an early-started rank of
// another node: no token, no address, the rest to come in the pending directory, which
// hyrun (here: the test) makes and fills like launcher/pending_directory.cpp.
class PendingRank : public ::testing::Test {
 protected:
  void SetUp() override {
    char name[] = "/tmp/hyrun-pending-test-XXXXXX";
    ASSERT_NE(::mkdtemp(name), nullptr);
    dir_ = name;
    for (const auto& [name, value] :
         std::vector<std::pair<const char*, std::string>>{{env::kRank, "5"},
                                                          {env::kWorldSize, "8"},
                                                          {env::kLocalRank, "1"},
                                                          {env::kLocalWorldSize, "4"},
                                                          {env::kNodeRank, "1"},
                                                          {env::kNumNodes, "2"},
                                                          {env::kBootstrapTimeoutMs, "60000"},
                                                          {env::kRootPending, dir_}})
      ::setenv(name, value.c_str(), 1);
    for (const char* name : {env::kJobToken, env::kRootAddress, env::kMasterAddr, env::kMasterPort}) ::unsetenv(name);
  }
  void TearDown() override {
    for (const char* name : {env::kRank, env::kWorldSize, env::kLocalRank, env::kLocalWorldSize, env::kNodeRank,
                             env::kNumNodes, env::kBootstrapTimeoutMs, env::kRootPending, env::kJobToken,
                             env::kRootAddress, env::kMasterAddr, env::kMasterPort})
      ::unsetenv(name);
    std::filesystem::remove_all(dir_);
  }
  // Puts rank 5's file as hyrun does: whole, then renamed into place.
  void put(const std::string& content) {
    const std::string partial = dir_ + "/.partial";
    std::ofstream(partial, std::ios::binary) << content;
    ASSERT_EQ(::rename(partial.c_str(), (dir_ + "/" + pending_environment_file(5)).c_str()), 0);
  }
  std::string dir_;
};

TEST_F(PendingRank, TakesTheRestFromItsFileIntoTheEnvironment) {
  const RankEnvironment started = RankEnvironment::from_environment();
  EXPECT_EQ(started.root_pending_dir, dir_);
  EXPECT_TRUE(started.job_token.empty());
  EXPECT_FALSE(started.root_address_hex);
  std::mt19937 rng(std::random_device{}());
  const std::string token = std::to_string(rng()) + std::to_string(rng());
  const std::string address = "0a1b" + std::to_string(rng());
  const std::string master = "10.1." + std::to_string(rng() % 250) + ".7";
  // The file comes while the rank waits for it.
  std::thread hyrun([&] {
    std::this_thread::sleep_for(50ms);
    put(format_pending_environment({std::string(env::kJobToken) + "=" + token,
                                    std::string(env::kRootAddress) + "=" + address,
                                    std::string(env::kMasterAddr) + "=" + master, "MASTER_PORT=29500"}));
  });
  const RankEnvironment now = receive_pending_environment(started, std::chrono::steady_clock::now() + 20s);
  hyrun.join();
  EXPECT_TRUE(now.root_pending_dir.empty());
  EXPECT_EQ(now.job_token, token);
  EXPECT_EQ(now.root_address_hex, address);
  EXPECT_EQ(now.rank, 5);
  ASSERT_NE(std::getenv(env::kMasterAddr), nullptr);
  EXPECT_EQ(std::string(std::getenv(env::kMasterAddr)), master) << "the program reads it as if hyrun had set it";
  EXPECT_EQ(std::getenv(env::kRootPending), nullptr);
}

TEST_F(PendingRank, AFileAlreadyThereIsTaken) {
  put(format_pending_environment({"HYRUN_JOB_TOKEN=abc", "HYRUN_ROOT_ADDRESS=00ff"}));
  const RankEnvironment now =
      receive_pending_environment(RankEnvironment::from_environment(), std::chrono::steady_clock::now() + 20s);
  EXPECT_EQ(now.job_token, "abc");
  EXPECT_EQ(now.root_address_hex, "00ff");
}

TEST_F(PendingRank, ADirectoryRemovedFirstIsAnErrorThatSaysHyrunEnded) {
  const RankEnvironment started = RankEnvironment::from_environment();
  std::thread hyrun([&] {
    std::this_thread::sleep_for(50ms);
    std::filesystem::remove_all(dir_);
  });
  const std::string said =
      refusal([&] { receive_pending_environment(started, std::chrono::steady_clock::now() + 20s); });
  EXPECT_NE(said.find("was removed before rank 0's address from hyrun came there (hyrun ended)"), std::string::npos)
      << "'" << said << "'";
  hyrun.join();
}

TEST_F(PendingRank, AFileThatIsNotOneIsAnError) {
  put("rank-died v1 3");
  EXPECT_THROW(receive_pending_environment(RankEnvironment::from_environment(), std::chrono::steady_clock::now() + 20s),
               Error);
}

TEST_F(PendingRank, ADirectoryOthersCanWriteToIsRefused) {
  ASSERT_EQ(::chmod(dir_.c_str(), 0777), 0);
  put(format_pending_environment({"HYRUN_JOB_TOKEN=forged"}));
  const std::string said = refusal(
      [] { receive_pending_environment(RankEnvironment::from_environment(), std::chrono::steady_clock::now() + 20s); });
  EXPECT_NE(said.find("is not a directory of this user that only it can write to"), std::string::npos)
      << "a file in a directory anyone can write to was taken: '" << said << "'";
}

TEST_F(PendingRank, SilenceEndsAtTheDeadline) {
  EXPECT_THROW(
      receive_pending_environment(RankEnvironment::from_environment(), std::chrono::steady_clock::now() + 50ms),
      TimeoutError);
}

// The same waits for a user with no inotify instance left (fs.inotify.max_user_instances,
// shared by all of a user's processes: 128 ranks of one user waiting at once used them up).
// In a child that becomes a user of the test's own (uid 65533), takes every instance it may
// have, and then waits as a rank would. `body` returns what went wrong, or "" when nothing did.
std::string without_inotify(const std::string& dir, const std::function<std::string()>& body) {
  if (::geteuid() != 0) return "skip";
  constexpr uid_t kUser = 65533;
  if (::chown(dir.c_str(), kUser, kUser) != 0) return "chown failed";
  int out[2];
  if (::pipe(out) != 0) return "pipe failed";
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(out[0]);
    std::string what;
    if (::setgroups(0, nullptr) != 0 || ::setresgid(kUser, kUser, kUser) != 0 ||
        ::setresuid(kUser, kUser, kUser) != 0) {
      what = "could not become uid 65533";
    } else {
      while (::inotify_init1(IN_CLOEXEC) >= 0) {
      }
      if (errno != EMFILE) what = std::string("inotify_init1 did not run out of instances: ") + std::strerror(errno);
      if (what.empty()) try {
          what = body();
        } catch (const std::exception& e) {
          what = std::string("threw: ") + e.what();
        }
    }
    [[maybe_unused]] const auto written = ::write(out[1], what.data(), what.size());
    ::_exit(0);
  }
  ::close(out[1]);
  std::string what;
  char chunk[512];
  for (ssize_t n; (n = ::read(out[0], chunk, sizeof chunk)) > 0;) what.append(chunk, static_cast<std::size_t>(n));
  ::close(out[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "the child did not end well: " + std::to_string(status);
  return what;
}

#define EXPECT_WITHOUT_INOTIFY(body)                                      \
  do {                                                                    \
    const std::string what = without_inotify(dir_, body);                 \
    if (what == "skip") GTEST_SKIP() << "needs root (a user of its own)"; \
    EXPECT_EQ(what, "");                                                  \
  } while (false)

TEST_F(PendingRank, WithNoInotifyInstanceLeftTheFileIsStillTaken) {
  EXPECT_WITHOUT_INOTIFY([&]() -> std::string {
    const RankEnvironment started = RankEnvironment::from_environment();
    std::jthread hyrun([&] {
      std::this_thread::sleep_for(50ms);
      put(format_pending_environment({"HYRUN_JOB_TOKEN=polled", "HYRUN_ROOT_ADDRESS=0a0b"}));
    });
    const RankEnvironment now = receive_pending_environment(started, std::chrono::steady_clock::now() + 20s);
    hyrun.join();
    if (now.job_token != "polled" || now.root_address_hex != "0a0b")
      return "took '" + now.job_token + "', '" + now.root_address_hex.value_or("") + "'";
    return "";
  });
}

TEST_F(PendingRank, WithNoInotifyInstanceLeftARemovedDirectoryStillSaysHyrunEnded) {
  EXPECT_WITHOUT_INOTIFY([&]() -> std::string {
    const RankEnvironment started = RankEnvironment::from_environment();
    std::jthread hyrun([&] {
      std::this_thread::sleep_for(50ms);
      std::filesystem::remove_all(dir_);
    });
    std::string what = "no error";
    try {
      receive_pending_environment(started, std::chrono::steady_clock::now() + 20s);
    } catch (const Error& e) {
      what = std::string(e.what()).find("(hyrun ended)") != std::string::npos ? "" : e.what();
    }
    hyrun.join();
    return what;
  });
}

TEST_F(PendingRank, WithNoInotifyInstanceLeftSilenceStillEndsAtTheDeadline) {
  EXPECT_WITHOUT_INOTIFY([&]() -> std::string {
    try {
      receive_pending_environment(RankEnvironment::from_environment(), std::chrono::steady_clock::now() + 50ms);
    } catch (const TimeoutError&) {
      return "";
    }
    return "no TimeoutError";
  });
}

// The node's leader puts its address there, and a rank of its node takes it (node_leader.hpp).
TEST_F(PendingRank, ALeadersAddressIsTakenByTheRestOfItsNode) {
  std::mt19937 rng(std::random_device{}());
  std::vector<std::byte> address(1 + rng() % 900);
  for (auto& b : address) b = static_cast<std::byte>(rng());
  std::thread leader([&] {
    std::this_thread::sleep_for(50ms);
    put_node_leader_address(dir_, 4, address);
  });
  EXPECT_EQ(await_node_leader_address(dir_, 5, 4, std::chrono::steady_clock::now() + 20s), address);
  leader.join();
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/." + kNodeLeaderFile + ".partial"));
}

TEST_F(PendingRank, AnotherRanksAddressOrALeaderFileThatIsNotOneIsAnError) {
  put_node_leader_address(dir_, 3, std::vector<std::byte>{std::byte{1}, std::byte{2}});
  const auto now = [] { return std::chrono::steady_clock::now() + 20s; };
  EXPECT_NE(refusal([&] { await_node_leader_address(dir_, 5, 4, now()); }).find("is not rank 4's address"),
            std::string::npos);
  std::ofstream(dir_ + "/" + kNodeLeaderFile) << "hyrun-leader v1 4 0g\n";
  EXPECT_NE(refusal([&] { await_node_leader_address(dir_, 5, 4, now()); }).find(kNodeLeaderFile), std::string::npos);
  std::ofstream(dir_ + "/" + kNodeLeaderFile) << "hyrun-leader v1 4 00ff";  // no newline: not written whole
  EXPECT_NE(refusal([&] { await_node_leader_address(dir_, 5, 4, now()); }).find("is not rank 4's address"),
            std::string::npos);
}

TEST_F(PendingRank, ALeaderThatNeverPutsItsAddressIsATimeoutNamingIt) {
  try {
    await_node_leader_address(dir_, 5, 4, std::chrono::steady_clock::now() + 50ms);
    ADD_FAILURE() << "no TimeoutError";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("the address of rank 4, which carries its node's joins"), std::string::npos)
        << e.what();
  }
}

// The write-then-rename that every file of the pending directory goes through.
TEST(WholeFile, ReplacesAFileWholeAndFailsWithoutLeavingAPartOrFollowingALink) {
  char name[] = "/tmp/hyrun-whole-file-test-XXXXXX";
  ASSERT_NE(::mkdtemp(name), nullptr);
  const std::string dir = name;
  const auto read = [&](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  put_whole_file(dir, "f", "first");
  put_whole_file(dir, "f", std::string(100000, 'x'));
  EXPECT_EQ(read(dir + "/f"), std::string(100000, 'x'));
  EXPECT_NE(refusal([&] { put_whole_file(dir + "/missing", "f", "x"); }).find(dir + "/missing/.f.partial"),
            std::string::npos);
  // A link planted at the partial name is neither followed nor left behind a success.
  ASSERT_EQ(::symlink((dir + "/target").c_str(), (dir + "/.g.partial").c_str()), 0);
  EXPECT_NE(refusal([&] { put_whole_file(dir, "g", "x"); }).find(".g.partial"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir + "/target"));
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(dir + "/.g.partial")));
  EXPECT_FALSE(std::filesystem::exists(dir + "/g"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hyrun
