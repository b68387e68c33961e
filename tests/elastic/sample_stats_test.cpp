#include "hyrun/ep/report/sample_stats.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace hyrun::ep::report {
namespace {

TEST(SampleStats, DropsTheFirstSample) {
  // The first sample (100) is the slow first touch: it must not reach max or avg.
  const auto s = stats_without_first({100, 2, 4, 6});
  EXPECT_DOUBLE_EQ(s.avg, 4);
  EXPECT_DOUBLE_EQ(s.min, 2);
  EXPECT_DOUBLE_EQ(s.max, 6);
  EXPECT_DOUBLE_EQ(s.median, 4);
}

TEST(SampleStats, TheMedianOfAnEvenCountIsTheUpperMiddleSample) {
  // Without the first: 5, 1, 3, 2 -> sorted 1 2 3 5; ep-bench-gpu's median_us lines use it.
  const auto s = stats_without_first({100, 5, 1, 3, 2});
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.avg, 2.75);
}

TEST(SampleStats, KeepsASingleSample) {
  const auto s = stats_without_first({7});
  EXPECT_DOUBLE_EQ(s.avg, 7);
  EXPECT_DOUBLE_EQ(s.min, 7);
  EXPECT_DOUBLE_EQ(s.max, 7);
  EXPECT_DOUBLE_EQ(s.median, 7);
}

TEST(SampleStats, RefusesNoSamples) { EXPECT_THROW(stats_without_first({}), std::invalid_argument); }

}  // namespace
}  // namespace hyrun::ep::report
