#include "launcher/rank_environment.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

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
