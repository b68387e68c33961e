// The end-of-run summary for a small hand-made run of expansion_fault_contraction on two nodes.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "hyrun/ep/report/summary_table.hpp"
#include "phase_samples.hpp"

namespace hyrun::ep::report {
namespace {

PhaseSample sample(int phase, int rank, PhaseRole state, std::optional<double> gbps, std::optional<double> join_ms = {},
                   std::optional<double> detect_ms = {}) {
  return test_support::hand_made_sample(phase, rank, state, gbps, join_ms, detect_ms, BandwidthStats{0, 100, 90, 110});
}

// Plan [[0,1],[0,1,2,3],[0,1,-2,3],[0,3]]: rank 2 is killed in phase 2, rank 1 leaves in phase 3.
std::vector<PhaseSample> hand_made_run() {
  using R = PhaseRole;
  return {
      sample(0, 0, R::kJoined, 10, 5.0),     sample(0, 1, R::kJoined, 12, 6.5),     sample(1, 0, R::kActive, 20),
      sample(1, 1, R::kActive, 22),          sample(1, 2, R::kJoined, 18, 40.4),    sample(1, 3, R::kJoined, 16, 41.0),
      sample(2, 0, R::kActive, 8, {}, 30.5), sample(2, 1, R::kActive, 9, {}, 31.0), sample(2, 2, R::kKilled, {}),
      sample(2, 3, R::kActive, 7, {}, 29.7), sample(3, 3, R::kActive, 28),          sample(3, 0, R::kActive, 30),
  };
}

TEST(SummaryTable, PlainText) {
  const auto samples = hand_made_run();
  const std::string expected =
      "node    rank  P0      P1      P2      P3      GB/s avg  GB/s min  GB/s max   join ms  detect ms\n"
      "node-a     0  joined  active  active  active     17.00      8.00     30.00       5.0       30.5\n"
      "node-a     1  joined  active  active  left       14.33      9.00     22.00       6.5       31.0\n"
      "node-b     2  idle    joined  killed  idle       18.00     18.00     18.00      40.4          -\n"
      "node-b     3  idle    joined  active  active     17.00      7.00     28.00      41.0       29.7\n"
      "Overall mean dispatch + combine bandwidth: 16.36 GB/s over 11 rank-phase samples (logical bandwidth: bytes counted per "
      "selection, traffic to self included)\n";
  EXPECT_EQ(format_summary(samples, 4), expected);
  EXPECT_EQ(format_summary(samples, 4).find('\x1b'), std::string::npos);
}

TEST(SummaryTable, ColoursMarksOnlyWhenAsked) {
  const auto text = format_summary(hand_made_run(), 4, {.color = true});
  EXPECT_NE(text.find("\x1b[32mjoined\x1b[0m"), std::string::npos) << text;
  EXPECT_NE(text.find("\x1b[32mactive\x1b[0m"), std::string::npos) << text;
  EXPECT_NE(text.find("\x1b[31mkilled\x1b[0m"), std::string::npos) << text;
  EXPECT_NE(text.find("left  "), std::string::npos) << text;
}

TEST(SummaryTable, NoColoursForAFile) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  EXPECT_FALSE(SummaryOptions::for_stream(f).color);
  std::fclose(f);
}

TEST(SummaryTable, OverallMeanIsTheMeanOfEveryBandwidthLine) {
  const auto samples = hand_made_run();
  ASSERT_TRUE(overall_mean_gbps(samples).has_value());
  EXPECT_DOUBLE_EQ(*overall_mean_gbps(samples), 180.0 / 11.0);
  EXPECT_FALSE(overall_mean_gbps(std::vector<PhaseSample>{}).has_value());
  EXPECT_NE(format_summary(std::vector<PhaseSample>{}, 1).find("none measured"), std::string::npos);
}

}  // namespace
}  // namespace hyrun::ep::report
