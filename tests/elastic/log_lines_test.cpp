// The reference log lines against CloudAI's own regexes (translated to ECMAScript: named groups
// become plain groups), for many random values; and that no line can contain a failure pattern.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "hyrun/common/error.hpp"
#include "hyrun/ep/report/log_lines.hpp"

namespace hyrun::ep::report {
namespace {

const std::string F = R"([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)";
// CloudAI: \[rank (?P<rank>\d+)\] Dispatch \+ combine bandwidth: (?P<bandwidth>F) GB/s, avg_t=(?P<avg_time>F) us, ...
const std::regex kBandwidth(R"(\[rank (\d+)\] Dispatch \+ combine bandwidth: ()" + F + R"() GB/s, avg_t=()" + F +
                            R"() us, min_t=()" + F + R"() us, max_t=()" + F + R"() us)");
// CloudAI: -> end phase (\d+)
const std::regex kEndPhase(R"(-> end phase (\d+))");
// The split line and the start line have no CloudAI regex; these follow the reference text.
const std::regex kSplit(R"(\[rank (\d+)\] Dispatch bandwidth: ()" + F + R"() GB/s, avg_t=()" + F +
                        R"() us \| Combine bandwidth: ()" + F + R"() GB/s, avg_t=()" + F + R"() us)");
const std::regex kStartPhase(R"(^global_rank=(\d+), local_rank=(\d+) -> start phase (\d+)$)");

const std::vector<std::string> kFailurePatterns = {
    "Traceback (most recent call last):", "no plan phases were found for rank",
    "srun: error:", "Exited with exit code"};

// A printed value with 2 decimals is within half a unit of the last place of the true value.
void expect_round_trip(const std::string& printed, double value) {
  const double parsed = std::stod(printed);
  EXPECT_LE(std::abs(parsed - value), 0.005 + std::abs(value) * 1e-12) << printed << " vs " << value;
}

void expect_no_failure_pattern(const std::string& line) {
  for (const auto& pattern : kFailurePatterns) EXPECT_EQ(line.find(pattern), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos) << "a log line must be one line: " << line;
}

// `line` matches `re`, whose groups are the rank and then `values` in order, each printed
// close enough to read back; and it holds no failure pattern.
void expect_line_round_trips(const std::string& line, const std::regex& re, int rank,
                             const std::array<double, 4>& values) {
  std::smatch m;
  ASSERT_TRUE(std::regex_search(line, m, re)) << line;
  EXPECT_EQ(std::stoi(m[1]), rank);
  for (std::size_t i = 0; i < values.size(); ++i) expect_round_trip(m[i + 2], values[i]);
  expect_no_failure_pattern(line);
}

class RandomValues {
 public:
  int rank() { return std::uniform_int_distribution<int>(0, 4095)(gen_); }
  double value() {
    // Mix of magnitudes: sub-unit, typical GB/s and us, and very large values.
    const double exponent = std::uniform_real_distribution<double>(-3, 9)(gen_);
    return std::pow(10.0, exponent);
  }
  std::mt19937_64& gen() { return gen_; }

 private:
  std::mt19937_64 gen_{20261122};
};

// A phase slowed to a crawl still moved bytes: its bandwidth must read positive, with three
// significant digits, in both lines (issue 20: 0.00 GB/s, which CloudAI takes for none).
TEST(LogLines, ASlowPhaseShowsAPositiveBandwidth) {
  RandomValues rnd;
  for (int i = 0; i < 2000; ++i) {
    const double gbps = std::pow(10.0, std::uniform_real_distribution<double>(-9, 0)(rnd.gen()));
    std::smatch m;
    const std::string line = bandwidth_line(1, {gbps, 950000.0, 477000.0, 1400000.0});
    ASSERT_TRUE(std::regex_search(line, m, kBandwidth)) << line;
    EXPECT_GT(std::stod(m[2]), 0.0) << line;
    EXPECT_LE(std::abs(std::stod(m[2]) - gbps), gbps * 5e-3) << line << " vs " << gbps;
    const std::string split = split_bandwidth_line(2, {gbps, 1.0, gbps / 3, 2.0});
    ASSERT_TRUE(std::regex_search(split, m, kSplit)) << split;
    EXPECT_GT(std::stod(m[2]), 0.0) << split;
    EXPECT_GT(std::stod(m[4]), 0.0) << split;
    EXPECT_LE(std::abs(std::stod(m[4]) - gbps / 3), gbps / 3 * 5e-3) << split;
  }
  EXPECT_EQ(gbps_text(0.0), "0.00") << "no bytes at all is still zero";
  EXPECT_EQ(gbps_text(45.678), "45.68") << "from 1 GB/s on, the reference's two decimals";
  EXPECT_EQ(gbps_text(0.012345), "0.0123");
}

TEST(LogLines, BandwidthLineMatchesCloudAiRegex) {
  RandomValues rnd;
  for (int i = 0; i < 2000; ++i) {
    const int rank = rnd.rank();
    const BandwidthStats s{rnd.value(), rnd.value(), rnd.value(), rnd.value()};
    ASSERT_NO_FATAL_FAILURE(
        expect_line_round_trips(bandwidth_line(rank, s), kBandwidth, rank, {s.gbps, s.avg_us, s.min_us, s.max_us}));
  }
}

TEST(LogLines, BandwidthLineIsTheReferenceText) {
  EXPECT_EQ(bandwidth_line(3, {45.678, 123.456, 100.0, 150.004}),
            "[rank 3] Dispatch + combine bandwidth: 45.68 GB/s, avg_t=123.46 us, min_t=100.00 us, max_t=150.00 us");
  EXPECT_EQ(
      split_bandwidth_line(7, {98.1, 77.0, 127.25, 114.5}),
      "[rank 7] Dispatch bandwidth: 98.10 GB/s, avg_t=77.00 us | Combine bandwidth: 127.25 GB/s, avg_t=114.50 us");
}

TEST(LogLines, SplitLineRoundTrips) {
  RandomValues rnd;
  for (int i = 0; i < 2000; ++i) {
    const int rank = rnd.rank();
    const SplitBandwidth s{rnd.value(), rnd.value(), rnd.value(), rnd.value()};
    const std::string line = split_bandwidth_line(rank, s);
    ASSERT_NO_FATAL_FAILURE(expect_line_round_trips(
        line, kSplit, rank, {s.dispatch_gbps, s.dispatch_avg_us, s.combine_gbps, s.combine_avg_us}));
    // The split line must not be mistaken for the combined line CloudAI averages.
    EXPECT_FALSE(std::regex_search(line, kBandwidth)) << line;
  }
}

TEST(LogLines, PhaseLinesMatch) {
  RandomValues rnd;
  for (int i = 0; i < 1000; ++i) {
    const int g = rnd.rank(), l = rnd.rank() % 8, p = rnd.rank() % 100;
    const std::string start = phase_start_line(g, l, p);
    const std::string end = phase_end_line(g, l, p);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(start, m, kStartPhase)) << start;
    EXPECT_EQ(std::stoi(m[1]), g);
    EXPECT_EQ(std::stoi(m[2]), l);
    EXPECT_EQ(std::stoi(m[3]), p);
    ASSERT_TRUE(std::regex_search(end, m, kEndPhase)) << end;
    EXPECT_EQ(std::stoi(m[1]), p);
    EXPECT_FALSE(std::regex_search(start, kEndPhase)) << start;
    EXPECT_EQ(end, "global_rank=" + std::to_string(g) + ", local_rank=" + std::to_string(l) + " -> end phase " +
                       std::to_string(p));
    expect_no_failure_pattern(start);
    expect_no_failure_pattern(end);
  }
}

TEST(LogLines, ConnectionLines) {
  const std::vector<int> ranks = {4, 5, 6, 7};
  const std::vector<int> six = {6};
  EXPECT_EQ(connections_added_line(0, 0, ranks),
            "global_rank=0, local_rank=0 -> adding connections to ranks [4, 5, 6, 7]");
  EXPECT_EQ(connections_removed_line(5, 1, six), "global_rank=5, local_rank=1 -> removing connections to ranks [6]");
  EXPECT_EQ(failed_ranks_detected_line(2, 2, six, 12.34),
            "global_rank=2, local_rank=2 -> detected failed ranks [6] in 12.3 ms");
  EXPECT_EQ(unused_rank_line(9, 1),
            "global_rank=9, local_rank=1 -> no phase of the plan uses this rank; exiting with status 0");
  expect_no_failure_pattern(unused_rank_line(9, 1));
  EXPECT_EQ(connections_added_line(0, 0, std::vector<int>{}),
            "global_rank=0, local_rank=0 -> adding connections to ranks []");
  RandomValues rnd;
  for (int i = 0; i < 500; ++i) {
    std::vector<int> some(static_cast<std::size_t>(rnd.rank() % 9));
    for (int& r : some) r = rnd.rank();
    for (const auto& line : {connections_added_line(rnd.rank(), 0, some), connections_removed_line(rnd.rank(), 1, some),
                             failed_ranks_detected_line(rnd.rank(), 2, some, rnd.value())}) {
      expect_no_failure_pattern(line);
      EXPECT_FALSE(std::regex_search(line, kBandwidth)) << line;
      EXPECT_FALSE(std::regex_search(line, kEndPhase)) << line;
    }
  }
}

TEST(LogLines, NonFiniteNumbersAreRefused) {
  try {
    bandwidth_line(3, {std::nan(""), 1, 1, 1});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bandwidth line for rank 3: gbps is nan"), std::string::npos) << e.what();
  }
  EXPECT_THROW(split_bandwidth_line(1, {1, 1, INFINITY, 1}), Error);
  EXPECT_THROW(failed_ranks_detected_line(1, 1, std::vector<int>{2}, INFINITY), Error);
}

}  // namespace
}  // namespace hyrun::ep::report
