#include <gtest/gtest.h>
#include <stdlib.h>

#include "hyrun/common/env_contract.hpp"
#include "hyrun/common/error.hpp"
#include "hyrun/common/job_token.hpp"
#include "sample_rank_environment.hpp"

namespace hyrun {
namespace {

// Sets the variables of `vars` for the test's duration and removes them afterwards.
class ScopedEnvironment {
 public:
  explicit ScopedEnvironment(const std::vector<std::pair<std::string, std::string>>& vars) {
    for (const auto& [k, v] : vars) {
      setenv(k.c_str(), v.c_str(), 1);
      names_.push_back(k);
    }
  }
  ~ScopedEnvironment() {
    for (const auto& k : names_) unsetenv(k.c_str());
  }

 private:
  std::vector<std::string> names_;
};

RankEnvironment sample() {
  RankEnvironment e = test_support::sample_rank_environment();
  e.job_token = make_job_token();
  e.root_address_hex = "00ff10";
  e.bootstrap_timeout_ms = 1234;
  return e;
}

// Every field of the contract away from its default: what a rank reads back is what its
// parent wrote, whole. Only the rendezvous defaults (MASTER_ADDR, MASTER_PORT,
// TORCHELASTIC_RUN_ID) are not read back: they are the user's if set (default_variables).
TEST(EnvContract, RoundTripsEveryField) {
  RankEnvironment original = sample();
  original.publish_fd = 9;
  original.incarnation = 3;
  original.output_terminal = true;
  original.control_fd = 7;
  original.start_ranks = {0, 2, 5};
  original.root_pending_dir = "/tmp/hyrun-0/hyrun-pending-x";
  original.master_addr = "10.0.0.1";
  original.master_port = 29500;
  original.run_id = "hyrun-run";
  const RankEnvironment defaults;
  for (const auto& [what, differs] : std::vector<std::pair<std::string, bool>>{
           {"rank", original.rank != defaults.rank},
           {"world_size", original.world_size != defaults.world_size},
           {"local_rank", original.local_rank != defaults.local_rank},
           {"local_world_size", original.local_world_size != defaults.local_world_size},
           {"node_rank", original.node_rank != defaults.node_rank},
           {"num_nodes", original.num_nodes != defaults.num_nodes},
           {"job_token", original.job_token != defaults.job_token},
           {"root_address_hex", original.root_address_hex != defaults.root_address_hex},
           {"bootstrap_timeout_ms", original.bootstrap_timeout_ms != defaults.bootstrap_timeout_ms}})
    ASSERT_TRUE(differs) << what << " is at its default: the round trip would not show it lost";
  ScopedEnvironment scoped(original.to_variables());
  RankEnvironment expected = original;
  expected.master_addr.clear();
  expected.master_port.reset();
  expected.run_id.clear();
  EXPECT_TRUE(RankEnvironment::from_environment() == expected);
  // And each field on its own, so that a failure names it.
  const RankEnvironment read = RankEnvironment::from_environment();
  EXPECT_EQ(read.rank, 5);
  EXPECT_EQ(read.world_size, 8);
  EXPECT_EQ(read.local_rank, 1);
  EXPECT_EQ(read.local_world_size, 4);
  EXPECT_EQ(read.node_rank, 1);
  EXPECT_EQ(read.num_nodes, 2);
  EXPECT_EQ(read.job_token, original.job_token);
  EXPECT_EQ(read.root_address_hex, "00ff10");
  EXPECT_EQ(read.publish_fd, 9);
  EXPECT_EQ(read.bootstrap_timeout_ms, 1234);
  EXPECT_EQ(read.incarnation, 3);
  EXPECT_TRUE(read.output_terminal);
  EXPECT_EQ(read.control_fd, 7);
  EXPECT_EQ(read.start_ranks, (std::vector<int>{0, 2, 5}));
  EXPECT_EQ(read.root_pending_dir, "/tmp/hyrun-0/hyrun-pending-x");
}

TEST(EnvContract, SetsTheCommonAliases) {
  const auto vars = sample().to_variables();
  auto value = [&](const std::string& name) {
    for (const auto& [k, v] : vars)
      if (k == name) return v;
    return std::string("<missing>");
  };
  EXPECT_EQ(value("RANK"), "5");
  EXPECT_EQ(value("WORLD_SIZE"), "8");
  EXPECT_EQ(value("LOCAL_RANK"), "1");
  EXPECT_EQ(value("LOCAL_WORLD_SIZE"), "4");
}

TEST(EnvContract, OutsideHyrunSaysSo) {
  unsetenv(env::kRank);
  try {
    RankEnvironment::from_environment();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "not started by hyrun: HYRUN_RANK is not set");
  }
}

TEST(EnvContract, RejectsMalformedAndInconsistentValues) {
  struct Bad {
    const char* name;
    const char* value;
    const char* error;  // part of the UsageError's text
  };
  for (const Bad& bad : {Bad{env::kWorldSize, "eight", "HYRUN_WORLD_SIZE='eight' is not valid"},
                         Bad{env::kRank, "8", "outside the world"}}) {
    auto vars = sample().to_variables();
    for (auto& [k, v] : vars)
      if (k == bad.name) v = bad.value;
    ScopedEnvironment scoped(vars);
    try {
      RankEnvironment::from_environment();
      FAIL() << bad.name << "=" << bad.value;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(bad.error), std::string::npos) << e.what();
    }
  }
}

TEST(EnvContract, StartRanksSayWhoJoinsLate) {
  RankEnvironment e = sample();  // rank 5 of 8
  EXPECT_FALSE(e.joins_late()) << "without HYRUN_START_RANKS every rank takes part in the start";
  e.start_ranks = {0, 1, 3};
  {
    ScopedEnvironment scoped(e.to_variables());
    const RankEnvironment read = RankEnvironment::from_environment();
    EXPECT_EQ(read.start_ranks, (std::vector<int>{0, 1, 3}));
    EXPECT_TRUE(read.joins_late());
  }
  e.start_ranks = {0, 5};
  EXPECT_FALSE(e.joins_late());
  e.incarnation = 1;
  EXPECT_TRUE(e.joins_late()) << "a restarted process always joins late";
  for (const char* bad : {"1,2", "0,3,2", "0,8", "0,,1", "x"}) {
    auto vars = sample().to_variables();
    vars.emplace_back(env::kStartRanks, bad);
    ScopedEnvironment scoped(vars);
    EXPECT_THROW(RankEnvironment::from_environment(), UsageError) << bad;
  }
}

TEST(PublishLine, RoundTripsAndRejectsOtherText) {
  const std::string line = format_publish_line("abcdef01");
  ASSERT_EQ(line.back(), '\n');
  EXPECT_EQ(parse_publish_line(line.substr(0, line.size() - 1)), "abcdef01");
  EXPECT_FALSE(parse_publish_line("hello world"));
  EXPECT_FALSE(parse_publish_line("hyrun-root v1 abc"));   // odd length
  EXPECT_FALSE(parse_publish_line("hyrun-root v1 zz"));    // not hex
  EXPECT_FALSE(parse_publish_line("hyrun-root v1 "));      // empty
  EXPECT_FALSE(parse_publish_line("hyrun-root v2 abcd"));  // another protocol version
}

TEST(JobToken, IsFreshRandomHex) {
  const auto a = make_job_token();
  const auto b = make_job_token();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
}

}  // namespace
}  // namespace hyrun
