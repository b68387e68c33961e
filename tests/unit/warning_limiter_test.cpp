// WarningLimiter: what bounds the warnings that outsiders can provoke.
#include "hyrun/common/warning_limiter.hpp"

#include <gtest/gtest.h>

#include "captured_log.hpp"

namespace hyrun {
namespace {

using namespace std::chrono_literals;

using test_support::CapturedLog;

TEST(WarningLimiter, TheFirstGoOutThenOneSummaryPerPeriodThenOneByOneAfterAQuietPeriod) {
  CapturedLog log;
  WarningLimiter limiter("refusals", 3, 10s);
  const auto t0 = WarningLimiter::Clock::now();
  for (int i = 0; i < 20; ++i) limiter.warn("refused " + std::to_string(i), t0);
  EXPECT_EQ(log.messages(), (std::vector<std::string>{"refused 0", "refused 1", "refused 2"}));
  EXPECT_EQ(limiter.held_back(), 17u);
  limiter.flush(t0 + 9s);
  EXPECT_EQ(log.messages().size(), 3u) << "no summary before the period is over";
  limiter.flush(t0 + 10s);
  ASSERT_EQ(log.messages().size(), 4u);
  EXPECT_EQ(log.messages().back(), "17 more refusals in the last 10 s (not logged one by one)");
  limiter.warn("refused 20", t0 + 11s);  // the flood goes on: counted
  EXPECT_EQ(log.messages().size(), 4u);
  limiter.flush(t0 + 20s);
  EXPECT_EQ(log.messages().back(), "1 more refusals in the last 10 s (not logged one by one)");
  limiter.flush(t0 + 30s);  // a quiet period: one by one again
  limiter.warn("refused 21", t0 + 31s);
  EXPECT_EQ(log.messages().back(), "refused 21");
}

}  // namespace
}  // namespace hyrun
