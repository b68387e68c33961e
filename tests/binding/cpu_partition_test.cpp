#include "hyrun/binding/cpu_partition.hpp"

#include <gtest/gtest.h>

using hyrun::binding::partition_cores;

namespace {
// n cores with 2 hyperthreads each, numbered like Linux x86: core c has c and c+n.
std::vector<std::vector<int>> ht_cores(int n) {
  std::vector<std::vector<int>> cores;
  for (int c = 0; c < n; ++c) cores.push_back({c, c + n});
  return cores;
}
}  // namespace

TEST(CpuPartition, WholeCoresWithTheirHyperthreads) {
  const auto s = partition_cores(ht_cores(8), 2);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].pus, (std::vector<int>{0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(s[1].pus, (std::vector<int>{4, 5, 6, 7, 12, 13, 14, 15}));
  EXPECT_EQ(s[0].whole_cores, 4);
  EXPECT_FALSE(s[0].shared);
}

TEST(CpuPartition, UnevenSplitDiffersByAtMostOneCore) {
  const auto s = partition_cores(ht_cores(7), 3);
  EXPECT_EQ(s[0].whole_cores + s[1].whole_cores + s[2].whole_cores, 7);
  for (const auto& slice : s) EXPECT_GE(slice.whole_cores, 2);
}

TEST(CpuPartition, SplitsHyperthreadsOnlyWhenCoresRunOut) {
  const auto s = partition_cores(ht_cores(2), 4);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].pus, (std::vector<int>{0}));
  EXPECT_EQ(s[1].pus, (std::vector<int>{2}));
  EXPECT_EQ(s[0].whole_cores, 0);
  EXPECT_FALSE(s[3].shared);
}

TEST(CpuPartition, SharesOnlyWhenPusRunOut) {
  const auto s = partition_cores({{0}}, 2);
  EXPECT_EQ(s[0].pus, s[1].pus);
  EXPECT_TRUE(s[1].shared);
}
