#include "hyrun/binding/cpu_list.hpp"

#include <gtest/gtest.h>

#include "hyrun/common/error.hpp"

using hyrun::binding::format_cpu_list;
using hyrun::binding::parse_cpu_list;

TEST(CpuList, ParsesRangesAndSingles) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11", "x"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list("5,1,1", "x"), (std::vector<int>{1, 5}));
}

TEST(CpuList, FormatsCompactly) {
  EXPECT_EQ(format_cpu_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(format_cpu_list({}), "");
}

TEST(CpuList, RejectsBadInputNamingIt) {
  try {
    parse_cpu_list("0-3,x", "--cpus-allowed");
    FAIL();
  } catch (const hyrun::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--cpus-allowed '0-3,x'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'x' is not an index"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_cpu_list("", "x"), hyrun::UsageError);
  EXPECT_THROW(parse_cpu_list("1,", "x"), hyrun::UsageError);
  try {
    parse_cpu_list("7-3", "--cpu-map");
    FAIL();
  } catch (const hyrun::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("reversed range '7-3'"), std::string::npos) << e.what();
  }
}
