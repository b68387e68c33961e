#include "hyrun/ep/bench/sample_stats.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace hyrun::ep::bench {
namespace {

TEST(SampleStats, DropsTheFirstSample) {
  // The first sample (100) is the slow first touch: it must not reach max or avg.
  const auto s = stats_without_first({100, 2, 4, 6});
  EXPECT_DOUBLE_EQ(s.avg, 4);
  EXPECT_DOUBLE_EQ(s.min, 2);
  EXPECT_DOUBLE_EQ(s.max, 6);
}

TEST(SampleStats, KeepsASingleSample) {
  const auto s = stats_without_first({7});
  EXPECT_DOUBLE_EQ(s.avg, 7);
  EXPECT_DOUBLE_EQ(s.min, 7);
  EXPECT_DOUBLE_EQ(s.max, 7);
}

TEST(SampleStats, RefusesNoSamples) { EXPECT_THROW(stats_without_first({}), std::invalid_argument); }

}  // namespace
}  // namespace hyrun::ep::bench
