#include "hyrun/launcher/rank_environment.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "hyrun/launcher/node_launch.hpp"
#include "sample_rank_environment.hpp"

namespace hyrun {
namespace {

std::map<std::string, std::string> as_map(const std::vector<std::string>& entries) {
  std::map<std::string, std::string> m;
  for (const auto& e : entries) {
    const auto eq = e.find('=');
    EXPECT_TRUE(m.emplace(e.substr(0, eq), e.substr(eq + 1)).second) << "duplicate " << e;
  }
  return m;
}

// The one start of a contract (hyrun's launch, ep-elastic's): the place as given, the
// launch's bootstrap limit, the rest at the contract's defaults.
TEST(LaunchContract, CarriesThePlaceAndTheLaunchsBootstrapLimit) {
  LaunchOptions options;
  options.bootstrap_timeout = std::chrono::milliseconds(4321);
  const RankEnvironment c =
      launch_contract(options, LaunchPlace{.world_size = 12, .local_world_size = 4, .node_rank = 2, .num_nodes = 3});
  // The rest at the defaults: assigned, as designated initializers would have to name them all.
  RankEnvironment expected;
  expected.world_size = 12;
  expected.local_world_size = 4;
  expected.node_rank = 2;
  expected.num_nodes = 3;
  expected.bootstrap_timeout_ms = 4321;
  expected.output_terminal = c.output_terminal;  // whatever this test's stdout is
  EXPECT_TRUE(c == expected);
}

TEST(RankEnvironment, ContractWinsAndForeignLaunchVariablesAreDropped) {
  setenv("PMIX_RANK", "7", 1);
  setenv("HYRUN_ROOT_ADDRESS", "outer-job", 1);
  setenv("HYRUN_LOG_LEVEL", "debug", 1);
  setenv("HYRUN_TEST_KEEP", "kept", 1);
  RankEnvironment c;
  c.rank = 1;
  c.world_size = 2;
  c.job_token = "t";
  const auto m = as_map(build_rank_environment(c, {{"UCX_NET_DEVICES", "mlx5_0:1"}, {"RANK", "binding-says"}},
                                               {"RANK=user-says", "FOO=bar"}));
  EXPECT_EQ(m.count("PMIX_RANK"), 0u);
  EXPECT_EQ(m.count("HYRUN_ROOT_ADDRESS"), 0u);  // the outer job's; this one has none
  EXPECT_EQ(m.at("HYRUN_LOG_LEVEL"), "debug");
  EXPECT_EQ(m.count("HYRUN_TEST_KEEP"), 0u);
  EXPECT_EQ(m.at("UCX_NET_DEVICES"), "mlx5_0:1");
  EXPECT_EQ(m.at("FOO"), "bar");
  EXPECT_EQ(m.at("RANK"), "1");
  EXPECT_EQ(m.at("HYRUN_RANK"), "1");
  EXPECT_EQ(m.at("PATH"), getenv("PATH"));
  for (const char* v : {"PMIX_RANK", "HYRUN_ROOT_ADDRESS", "HYRUN_LOG_LEVEL", "HYRUN_TEST_KEEP"}) unsetenv(v);
}

}  // namespace
}  // namespace hyrun

namespace hyrun {
namespace {

TEST(RankEnvironment, TorchrunVariablesDescribeTheRankAndUserSetDefaultsWin) {
  RankEnvironment c = test_support::sample_rank_environment();  // rank 5 of 8, local 1 of 4, node 1 of 2
  c.incarnation = 2;
  c.job_token = "t";
  c.master_addr = "10.0.0.1";
  c.master_port = 29400;
  c.run_id = "job-1";
  unsetenv("MASTER_ADDR");
  unsetenv("OMP_NUM_THREADS");
  setenv("MASTER_PORT", "1234", 1);  // the user's, from hyrun's environment
  setenv("GROUP_RANK", "9", 1);      // an outer launcher's: describes another process
  const auto m = as_map(build_rank_environment(c, {}, {"TORCHELASTIC_RUN_ID=mine"},
                                               {{"OMP_NUM_THREADS", "14"}, {"GLOO_SOCKET_IFNAME", "eth0"}}));
  EXPECT_EQ(m.at("MASTER_ADDR"), "10.0.0.1");
  EXPECT_EQ(m.at("MASTER_PORT"), "1234");
  EXPECT_EQ(m.at("TORCHELASTIC_RUN_ID"), "mine");
  EXPECT_EQ(m.at("OMP_NUM_THREADS"), "14");
  EXPECT_EQ(m.at("GLOO_SOCKET_IFNAME"), "eth0");
  EXPECT_EQ(m.at("GROUP_RANK"), "1");
  EXPECT_EQ(m.at("GROUP_WORLD_SIZE"), "2");
  EXPECT_EQ(m.at("ROLE_RANK"), "5");
  EXPECT_EQ(m.at("ROLE_WORLD_SIZE"), "8");
  EXPECT_EQ(m.at("LOCAL_WORLD_SIZE"), "4");
  EXPECT_EQ(m.at("TORCHELASTIC_RESTART_COUNT"), "2");
  setenv("OMP_NUM_THREADS", "3", 1);
  EXPECT_EQ(as_map(build_rank_environment(c, {}, {}, {{"OMP_NUM_THREADS", "14"}})).at("OMP_NUM_THREADS"), "3");
  for (const char* v : {"MASTER_PORT", "GROUP_RANK", "OMP_NUM_THREADS"}) unsetenv(v);
}

}  // namespace
}  // namespace hyrun
