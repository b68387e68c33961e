#include "hyrun/common/start_rank_request.hpp"

#include <gtest/gtest.h>

namespace hyrun {
namespace {

TEST(StartRankRequest, RoundTrips) {
  EXPECT_EQ(format_start_rank_request(5), "start-rank v1 rank=5");
  for (int r : {1, 7, 4095}) EXPECT_EQ(parse_start_rank_request(format_start_rank_request(r)), r);
}

TEST(StartRankRequest, RejectsOtherMessages) {
  for (const char* bad : {"start-rank v1 rank=0", "start-rank v1 rank=-3", "start-rank v1 rank=",
                          "start-rank v1 rank=2x", "start-rank v2 rank=2", "planned-exit v2 respawn=0 exit=0", ""})
    EXPECT_FALSE(parse_start_rank_request(bad)) << bad;
}

}  // namespace
}  // namespace hyrun
