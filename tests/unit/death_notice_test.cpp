#include "hyrun/common/death_notice.hpp"

#include <gtest/gtest.h>

namespace hyrun {
namespace {

TEST(DeathNotice, RoundTripsEveryRankOfTheWorld) {
  for (int rank : {0, 1, 7, 4095}) {
    EXPECT_EQ(parse_rank_died(format_rank_died(rank), 4096), rank);
  }
  EXPECT_EQ(format_rank_died(5), "rank-died v1 5");
}

TEST(DeathNotice, RejectsMalformedOrOutOfWorldRanks) {
  for (const char* bad : {"rank-died v1 8", "rank-died v1 -1", "rank-died v1 ", "rank-died v1 3x", "rank-died v2 3",
                          "rank-died v1 3 ", "handles-deaths v1", ""})
    EXPECT_FALSE(parse_rank_died(bad, 8)) << bad;
}

}  // namespace
}  // namespace hyrun
