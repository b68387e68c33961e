#include <gtest/gtest.h>

#include "hyrun/worker.hpp"

namespace hyrun {
namespace {

TEST(IndexList, CompactsRuns) {
  EXPECT_EQ(format_index_list({}), "");
  EXPECT_EQ(format_index_list({3}), "3");
  EXPECT_EQ(format_index_list({0, 1, 2, 3, 8}), "0-3,8");
  EXPECT_EQ(format_index_list({0, 2, 4, 5}), "0,2,4-5");
}

TEST(RankBinding, DescribesDefaults) {
  RankBinding b;
  b.cpus = {0, 1};
  EXPECT_EQ(b.describe(), "cpus=0-1 mem=any gpus=none ucx_net_devices=auto ucx_tls=auto");
}

}  // namespace
}  // namespace hyrun
