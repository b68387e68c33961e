// The launch sequence's paths that end a multi-node job, driven by a fake exchange in
// place of PMIx: what a node does when the fence times out, when the root failed, when a
// node failed before the exchange, and when a signal comes during the fence. The ranks are
// real processes (sh, sleep); the Slurm tests (tests/cluster) run the same paths with PMIx.
#include "hyrun/launcher/launch_sequence.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include "hyrun/common/env_contract.hpp"
#include "hyrun/common/error.hpp"
#include "hyrun/common/pending_environment.hpp"

namespace hyrun {
namespace {

using namespace std::chrono_literals;

// What the fake's abort throws: the sequence's way of ending the job everywhere.
struct Aborted {
  int code;
  std::string why;
};

class FakeExchange final : public RootExchange {
 public:
  FakeExchange(int task, int tasks) : task_(task), tasks_(tasks) {}

  int task() const override { return task_; }
  int tasks() const override { return tasks_; }
  binding::NodeTaskShare task_share() const override { return {}; }
  std::string host() const override { return "node-" + std::to_string(task_); }
  bool has_peers() const override { return true; }
  std::optional<ServedJob> served_job() const override { return std::nullopt; }  // no libpmix server in a unit test
  void offer_rendezvous(RootRecord&, NodeLaunch&) override {}
  void take_rendezvous(const RootRecord&, NodeLaunch&) override {}

  void put_node(const NodeRecord& record) override { put_node_ = record; }
  void put_root(const RootRecord& record) override { put_root_ = record; }
  bool fence(std::chrono::milliseconds, const std::function<bool()>& stop_requested) override {
    ++fences;
    return on_fence(stop_requested);
  }
  std::optional<std::vector<NodeRecord>> node_records(std::chrono::milliseconds,
                                                      const std::function<bool()>& stop_requested) override {
    if (!on_records(stop_requested)) return std::nullopt;
    std::vector<NodeRecord> records;
    for (int task = 0; task < tasks_; ++task) records.push_back(task == task_ ? put_node_.value() : others.at(task));
    return records;
  }
  std::optional<RootRecord> root_record(std::chrono::milliseconds, const std::function<bool()>&) override {
    return task_ == 0 ? put_root_.value() : root.value();
  }
  [[noreturn]] void abort(int code, const std::string& why) override { throw Aborted{code, why}; }

  // What the other tasks put, as the fence would have brought it.
  std::map<int, NodeRecord> others;
  std::optional<RootRecord> root;
  std::function<bool(const std::function<bool()>&)> on_fence = [](const auto&) { return true; };
  // While the records are read: false is a stop that stop_requested said.
  std::function<bool(const std::function<bool()>&)> on_records = [](const auto&) { return true; };
  int fences = 0;
  std::optional<NodeRecord> put_node_;
  std::optional<RootRecord> put_root_;

 private:
  int task_, tasks_;
};

LaunchOptions options_for(std::vector<std::string> command, BootstrapMode bootstrap) {
  LaunchOptions options;
  options.ranks = 1;
  options.command = std::move(command);
  options.bootstrap = bootstrap;
  options.bootstrap_timeout = 30s;  // a limit that only a hang reaches
  options.grace_period = 5s;
  options.binding.gpus_per_rank = 0;  // CPU-only ranks: the test machine need not have a GPU
  return options;
}

// What a node with the default options puts.
NodeRecord record_of(int ranks, std::string host, std::optional<std::string> error, int exit_code) {
  NodeRecord record;
  record.ranks = ranks;
  record.host = std::move(host);
  record.error = std::move(error);
  record.exit_code = exit_code;
  record.tree_width = kDefaultTreeWidth;
  return record;
}

NodeRecord good_record(int task) { return record_of(1, "node-" + std::to_string(task), std::nullopt, 0); }

// True when this process has no child left: every rank was reaped.
bool no_child_left() {
  int status;
  return ::waitpid(-1, &status, WNOHANG) < 0 && errno == ECHILD;
}

class LaunchSequence : public ::testing::Test {
 protected:
  SignalEvents signals{SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};
};

TEST_F(LaunchSequence, AFenceThatTimesOutStopsRankZeroAndAbortsTheJob) {
  // The root has started rank 0 (it published) when another node never reaches the fence.
  auto options =
      options_for({"/bin/sh", "-c", "printf 'hyrun-root v1 abcd\\n' >&3; exec sleep 60"}, BootstrapMode::kUcx);
  FakeExchange exchange(0, 2);
  exchange.on_fence = [](const auto&) -> bool { throw TimeoutError("the PMIx fence did not complete within 30 s"); };
  try {
    run_launch(options, signals, exchange);
    FAIL() << "the job was not aborted";
  } catch (const Aborted& a) {
    EXPECT_EQ(a.code, exit_code::kTimeout);
    EXPECT_NE(a.why.find("the PMIx fence did not complete"), std::string::npos) << a.why;
  }
  ASSERT_TRUE(exchange.put_root_);
  EXPECT_EQ(exchange.put_root_->root_address, "abcd");
  EXPECT_TRUE(no_child_left()) << "rank 0 outlived the aborted launch";
}

TEST_F(LaunchSequence, AFenceThatTimesOutOnAnotherNodeAbortsTheJob) {
  auto options = options_for({"/bin/true"}, BootstrapMode::kNone);
  FakeExchange exchange(1, 2);
  exchange.on_fence = [](const auto&) -> bool { throw TimeoutError("the PMIx fence did not complete within 30 s"); };
  EXPECT_THROW(
      {
        try {
          run_launch(options, signals, exchange);
        } catch (const Aborted& a) {
          EXPECT_EQ(a.code, exit_code::kTimeout);
          throw;
        }
      },
      Aborted);
  EXPECT_TRUE(exchange.put_node_);
  EXPECT_FALSE(exchange.put_root_) << "only the root puts the root's record";
}

TEST_F(LaunchSequence, TheRootsFailureEndsAnotherNodeByItself) {
  auto options = options_for({"/bin/true"}, BootstrapMode::kUcx);
  FakeExchange exchange(1, 2);
  exchange.others[0] = good_record(0);
  RootRecord root;
  root.error = "rank 0 (pid 7) exited with status 3 before publishing its UCX address";
  root.exit_code = 3;
  exchange.root = root;
  try {
    run_launch(options, signals, exchange);
    FAIL() << "the node went on after the root failed";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "the root node failed before the launch: rank 0 (pid 7) exited with status 3 before publishing its UCX "
              "address");
    EXPECT_EQ(e.exit_code(), exit_code::kLauncherError);
  }  // an Aborted escapes and fails the test: every node saw the root's record, no abort is needed
  EXPECT_EQ(exchange.fences, 1);
  EXPECT_TRUE(no_child_left());
}

TEST_F(LaunchSequence, TheRootsOwnFailureIsInItsRecordAndThrownAfterTheFence) {
  auto options = options_for({"/nonexistent/hyrun-test-program"}, BootstrapMode::kUcx);
  FakeExchange exchange(0, 2);
  exchange.others[1] = good_record(1);
  try {
    run_launch(options, signals, exchange);
    FAIL() << "a program that cannot start did not fail the launch";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), exit_code::kNotFound);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/hyrun-test-program"), std::string::npos) << e.what();
  }
  EXPECT_EQ(exchange.fences, 1) << "the root must reach the fence whatever happened before";
  ASSERT_TRUE(exchange.put_root_);
  ASSERT_TRUE(exchange.put_root_->error);
  EXPECT_NE(exchange.put_root_->error->find("/nonexistent/hyrun-test-program"), std::string::npos);
  EXPECT_EQ(exchange.put_root_->exit_code, exit_code::kNotFound);
}

TEST_F(LaunchSequence, ANodeThatFailedBeforeTheExchangeIsNamedOnTheOthers) {
  auto options = options_for({"/bin/true"}, BootstrapMode::kNone);
  FakeExchange exchange(0, 2);
  exchange.others[1] = record_of(1, "node-b", "--gpus: GPU 7 is not visible", exit_code::kUsage);
  try {
    run_launch(options, signals, exchange);
    FAIL() << "the root went on without a node that failed";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "hyrun task 1 on node-b failed before the launch: --gpus: GPU 7 is not visible");
    EXPECT_EQ(e.exit_code(), exit_code::kUsage);
  }
  EXPECT_TRUE(no_child_left());
}

TEST_F(LaunchSequence, ADifferentRankCountIsAUsageErrorOnEveryNode) {
  auto options = options_for({"/bin/true"}, BootstrapMode::kNone);
  FakeExchange exchange(1, 2);
  exchange.others[0] = record_of(4, "node-a", std::nullopt, 0);
  try {
    run_launch(options, signals, exchange);
    FAIL() << "a different -n was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("task 0 on node-a has -n 4"), std::string::npos) << e.what();
  }
}

// Every node computes the link's tree from the same width (link_tree.hpp): a node started
// with another would watch, and be watched by, hyrun processes that do not know it.
TEST_F(LaunchSequence, ADifferentTreeWidthIsAUsageErrorOnEveryNode) {
  auto options = options_for({"/bin/true"}, BootstrapMode::kNone);
  FakeExchange exchange(1, 2);
  exchange.others[0] = good_record(0);
  exchange.others[0].tree_width = 4;
  try {
    run_launch(options, signals, exchange);
    FAIL() << "a different --tree-width was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("task 0 on node-0 has --tree-width 4"), std::string::npos) << e.what();
  }
}

// A wait on the other nodes (the fence, the records' gets) during which SIGTERM comes: blocked
// by SignalEvents, it waits in the queue as one during a real wait would. False: stopped.
bool sigterm_comes(const std::function<bool()>& stop_requested) {
  ::raise(SIGTERM);
  return !stop_requested();
}

// The launch honours the signal: it aborts the job with 128 + SIGTERM and says why.
void expect_aborted_by_sigterm(const LaunchOptions& options, SignalEvents& signals, FakeExchange& exchange) {
  try {
    run_launch(options, signals, exchange);
    FAIL() << "the signal was not honoured";
  } catch (const Aborted& a) {
    EXPECT_EQ(a.code, 128 + SIGTERM);
    EXPECT_NE(a.why.find("stopped by a signal"), std::string::npos) << a.why;
  }
}

TEST_F(LaunchSequence, ASignalDuringTheFenceIsHonouredAndAbortsTheJob) {
  FakeExchange exchange(1, 2);
  exchange.on_fence = sigterm_comes;
  expect_aborted_by_sigterm(options_for({"/bin/true"}, BootstrapMode::kNone), signals, exchange);
}

TEST_F(LaunchSequence, ASignalWhileTheRecordsAreReadIsHonouredAndAbortsTheJob) {
  // A record that does not come (a task of the job that is not hyrun) leaves the node waiting
  // up to --bootstrap-timeout: a signal meanwhile ends it at once.
  FakeExchange exchange(1, 2);
  exchange.others[0] = good_record(0);
  exchange.on_records = sigterm_comes;
  expect_aborted_by_sigterm(options_for({"/bin/true"}, BootstrapMode::kNone), signals, exchange);
  EXPECT_EQ(exchange.fences, 1);
  EXPECT_TRUE(no_child_left());
}

TEST_F(LaunchSequence, RecordsThatAgreeStartTheNodesRanks) {
  // The path every good launch takes: records, fence, the root's record, the ranks.
  auto options = options_for({"/bin/sh", "-c", "exit 0"}, BootstrapMode::kNone);
  options.ranks = 2;
  FakeExchange exchange(1, 2);
  exchange.others[0] = record_of(2, "node-a", std::nullopt, 0);
  RootRecord root;
  root.ranks = 2;
  root.world_size = 4;
  root.job_token = "0123456789abcdef0123456789abcdef";
  exchange.root = root;
  EXPECT_EQ(run_launch(options, signals, exchange), exit_code::kSuccess);
  EXPECT_TRUE(no_child_left());
}

// What the scripts below wrote: a file's text, or "" when it is not there.
std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool wait_for_file(const std::string& path, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (::access(path.c_str(), F_OK) != 0) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// A rank that keeps the environment it started with (start.L) and the file hyrun puts for
// it in HYRUN_ROOT_PENDING (rest.L), as the worker library would take it.
const char* kEarlyRank =
    "env > \"$0/start.$HYRUN_LOCAL_RANK.tmp\" && mv \"$0/start.$HYRUN_LOCAL_RANK.tmp\" \"$0/start.$HYRUN_LOCAL_RANK\"; "
    "f=\"$HYRUN_ROOT_PENDING/rank.$HYRUN_RANK\"; "
    "for i in $(seq 2000); do [ -e \"$f\" ] && break; sleep 0.01; done; "
    "cp \"$f\" \"$0/rest.$HYRUN_LOCAL_RANK.tmp\"; mv \"$0/rest.$HYRUN_LOCAL_RANK.tmp\" \"$0/rest.$HYRUN_LOCAL_RANK\"";

class TemporaryDirectory {
 public:
  TemporaryDirectory() {
    char name[] = "/tmp/hyrun-launch-test-XXXXXX";
    if (::mkdtemp(name) == nullptr) throw SystemError("mkdtemp", errno);
    path_ = name;
  }
  ~TemporaryDirectory() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST_F(LaunchSequence, AnotherNodesRanksStartBeforeTheFenceAndGetTheTokenAndAddressAfterIt) {
  TemporaryDirectory dir;
  auto options = options_for({"/bin/sh", "-c", kEarlyRank, dir.path()}, BootstrapMode::kUcx);
  options.ranks = 2;
  FakeExchange exchange(1, 2);
  exchange.others[0] = record_of(2, "node-a", std::nullopt, 0);
  // The fence completes only once both ranks run: they must have started before it.
  bool started_before_fence = false;
  exchange.on_fence = [&](const auto&) {
    started_before_fence = wait_for_file(dir.path() + "/start.0", 20s) && wait_for_file(dir.path() + "/start.1", 20s);
    return true;
  };
  std::mt19937 rng(std::random_device{}());
  RootRecord root;
  root.ranks = 2;
  root.world_size = 4;
  root.job_token = fmt::format("{:016x}{:016x}", rng(), rng());
  root.root_address = fmt::format("{:08x}{:08x}", rng(), rng());
  exchange.root = root;
  EXPECT_EQ(run_launch(options, signals, exchange), exit_code::kSuccess);
  EXPECT_TRUE(started_before_fence) << "the ranks were not started before the fence";
  for (int local = 0; local < 2; ++local) {
    const std::string start = read_file(dir.path() + "/start." + std::to_string(local));
    EXPECT_NE(start.find("HYRUN_ROOT_PENDING=/"), std::string::npos) << start;
    EXPECT_EQ(start.find("HYRUN_JOB_TOKEN="), std::string::npos) << "a token before the fence: " << start;
    EXPECT_EQ(start.find("HYRUN_ROOT_ADDRESS="), std::string::npos) << start;
    EXPECT_NE(start.find("HYRUN_RANK=" + std::to_string(2 + local) + "\n"), std::string::npos) << start;
    const auto rest = parse_pending_environment(read_file(dir.path() + "/rest." + std::to_string(local)));
    ASSERT_TRUE(rest) << "rank " << local << " got no pending environment";
    std::vector<std::string> sorted = *rest;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<std::string>{"HYRUN_JOB_TOKEN=" + root.job_token,
                                                "HYRUN_ROOT_ADDRESS=" + *root.root_address}));
  }
  EXPECT_TRUE(no_child_left());
}

TEST_F(LaunchSequence, TheRootsOtherRanksStartBeforeRankZeroPublishes) {
  TemporaryDirectory dir;
  // Rank 0 says the worker library's hello, then publishes only once rank 1 runs (at most
  // 20 s): with the old order (rank 1 after the address) rank 1's start would come after it.
  const std::string script = std::string(
                                 "if [ \"$HYRUN_LOCAL_RANK\" = 0 ]; then printf 'hyrun-hello v1\\n' >&3; "
                                 "for i in $(seq 2000); do [ -e \"$0/start.1\" ] && break; sleep 0.01; done; "
                                 "[ -e \"$0/start.1\" ] && touch \"$0/rank1-first\"; "
                                 "printf 'hyrun-root v1 abcd12\\n' >&3; exit 0; fi; ") +
                             kEarlyRank;
  auto options = options_for({"/bin/sh", "-c", script, dir.path()}, BootstrapMode::kUcx);
  options.ranks = 2;
  FakeExchange exchange(0, 1);
  EXPECT_EQ(run_launch(options, signals, exchange), exit_code::kSuccess);
  EXPECT_EQ(::access((dir.path() + "/rank1-first").c_str(), F_OK), 0) << "rank 1 did not run before rank 0 published";
  const auto rest = parse_pending_environment(read_file(dir.path() + "/rest.1"));
  ASSERT_TRUE(rest);
  EXPECT_EQ(*rest, std::vector<std::string>{"HYRUN_ROOT_ADDRESS=abcd12"});
  const std::string start = read_file(dir.path() + "/start.1");
  EXPECT_NE(start.find("HYRUN_JOB_TOKEN="), std::string::npos) << "the root knows the token at once: " << start;
  EXPECT_TRUE(no_child_left());
}

TEST_F(LaunchSequence, WithoutRankZerosHelloTheOthersStartAfterItsAddress) {
  // A rank 0 that does not say it uses the worker library may well fail as a program that
  // does not: its failure must stay rank 0's, so the others wait for its address.
  TemporaryDirectory dir;
  const std::string script = std::string(
      "if [ \"$HYRUN_LOCAL_RANK\" = 0 ]; then sleep 0.2; [ -e \"$0/start.1\" ] && touch \"$0/too-early\"; "
      "printf 'hyrun-root v1 abcd12\\n' >&3; exit 0; fi; "
      "env > \"$0/start.1\"");
  auto options = options_for({"/bin/sh", "-c", script, dir.path()}, BootstrapMode::kUcx);
  options.ranks = 2;
  FakeExchange exchange(0, 1);
  EXPECT_EQ(run_launch(options, signals, exchange), exit_code::kSuccess);
  EXPECT_NE(::access((dir.path() + "/too-early").c_str(), F_OK), 0) << "rank 1 started before rank 0's hello";
  const std::string start = read_file(dir.path() + "/start.1");
  EXPECT_NE(start.find("HYRUN_ROOT_ADDRESS=abcd12\n"), std::string::npos) << start;
  EXPECT_EQ(start.find("HYRUN_ROOT_PENDING="), std::string::npos) << start;
}

}  // namespace
}  // namespace hyrun
