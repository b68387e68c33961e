// The coordinator's failure agreement without a network: whose report it waits for, the
// union of the reports, the iteration and epoch every survivor resumes at, and reports that
// name impossible ranks.
#include "failure_agreement.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "hyrun/common/error.hpp"

namespace hyrun::ep::elastic {
namespace {

using V = std::vector<int>;

/// Flags by rank for `ranks` in a world of `n`.
std::vector<char> flags(int n, const V& ranks) {
  std::vector<char> f(static_cast<std::size_t>(n), 0);
  for (int r : ranks) f[r] = 1;
  return f;
}

TEST(FailureAgreement, TheUnionOfTheReportsAndTheLatestIterationAreAgreed) {
  FailureAgreement a(flags(8, {0, 1, 2, 3, 4, 6}), 2);
  a.begin_round({6}, 10);  // rank 0 saw 6 fail at iteration 10
  const auto alive = [](int) { return false; };
  V asked;
  while (const auto r = a.next_reporter(alive)) {
    asked.push_back(*r);
    // Rank 2 saw 4 fail too, one iteration later; the others only 6.
    a.add_report(*r, *r == 2 ? msg::Failed{{4, 6}, 0.5, 11} : msg::Failed{{6}, 0.5, 10});
  }
  // 4 is not asked: rank 2's report named it failed before its turn; 5 and 7 are not in the phase.
  EXPECT_EQ(asked, (V{1, 2, 3}));
  const auto d = a.decide();
  EXPECT_EQ(d.resume.ranks, (V{4, 6}));
  EXPECT_EQ(d.resume.iteration, 11);
  EXPECT_EQ(d.resume.epoch, phase_epoch(2, 1));
  EXPECT_EQ(d.survivors, (V{1, 2, 3}));
  EXPECT_EQ(a.failed(), flags(8, {4, 6}));
}

TEST(FailureAgreement, ARankKnownDeadIsNotWaitedForAndCountsFailed) {
  FailureAgreement a(flags(4, {0, 1, 2, 3}), 0);
  a.begin_round({}, 5);  // rank 0 saw nothing itself (a timeout elsewhere)
  const auto dead = [](int r) { return r == 1; };
  V asked;
  while (const auto r = a.next_reporter(dead)) {
    asked.push_back(*r);
    a.add_report(*r, msg::Failed{{}, 1.0, 5});
  }
  EXPECT_EQ(asked, (V{2, 3}));
  const auto d = a.decide();
  EXPECT_EQ(d.resume.ranks, V{1});
  EXPECT_EQ(d.survivors, (V{2, 3}));
}

TEST(FailureAgreement, ALaterRoundNamesOnlyTheNewlyFailedWithAHigherEpoch) {
  FailureAgreement a(flags(4, {0, 1, 2, 3}), 1);
  const auto alive = [](int) { return false; };
  a.begin_round({3}, 2);
  while (const auto r = a.next_reporter(alive)) a.add_report(*r, msg::Failed{{3}, 1.0, 2});
  const auto first = a.decide();
  a.begin_round({2}, 4);
  V asked;
  while (const auto r = a.next_reporter(alive)) {
    asked.push_back(*r);
    a.add_report(*r, msg::Failed{{2}, 1.0, 4});
  }
  EXPECT_EQ(asked, V{1});  // 3 failed in the first round, 2 in this one
  const auto second = a.decide();
  EXPECT_EQ(first.resume.ranks, V{3});
  EXPECT_EQ(second.resume.ranks, V{2});
  EXPECT_GT(second.resume.epoch, first.resume.epoch);
  EXPECT_LT(second.resume.epoch, phase_epoch(2, 0));  // below every epoch of the next phase
  EXPECT_EQ(second.survivors, V{1});
  EXPECT_EQ(a.failed(), flags(4, {2, 3}));
}

TEST(FailureAgreement, AReportNamingARankOutsideTheWorldOrTheCoordinatorIsRefused) {
  FailureAgreement a(flags(4, {0, 1, 2, 3}), 0);
  a.begin_round({3}, 0);
  const auto alive = [](int) { return false; };
  ASSERT_EQ(a.next_reporter(alive), 1);
  try {
    a.add_report(1, msg::Failed{{9}, 1.0, 0});
    FAIL() << "a report naming rank 9 of 4 was taken";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "rank 0: rank 1 reports rank 9 failed, outside the world of 4 ranks");
  }
  try {
    a.add_report(2, msg::Failed{{0}, 1.0, 0});
    FAIL() << "a report naming the coordinator was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 2 reports the coordinator (rank 0) failed"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace hyrun::ep::elastic
