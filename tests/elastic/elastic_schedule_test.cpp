// The schedule of a run of plans: which rank leaves, dies and needs a new process in each
// phase, within one plan and across plans, with every rank started at launch or staged.
#include "elastic_schedule.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace hyrun::ep::elastic {
namespace {

using V = std::vector<int>;

std::vector<ElasticPlan> plans_of(const std::vector<const char*>& texts, int world) {
  std::vector<ElasticPlan> plans;
  for (const char* t : texts) plans.push_back(ElasticPlan::parse(t, world, "test plan"));
  return plans;
}

TEST(ElasticSchedule, OnePlanTakesThePlansSets) {
  const ElasticSchedule s(plans_of({"[[0,1,2,3],[0,1,2,3,4,5,6,7],[0,1,2,3,4,-6,7],[0,1,2,3,4,5,6,7]]"}, 8), 8);
  ASSERT_EQ(s.phases().size(), 4u);
  EXPECT_EQ(ranks_where(s.phases()[0].active), (V{0, 1, 2, 3}));
  EXPECT_EQ(ranks_where(s.phases()[0].new_process), V{});  // every rank started with the job
  EXPECT_EQ(ranks_where(s.phases()[1].new_process), V{});  // 4-7 started at launch, idle until now
  EXPECT_EQ(ranks_where(s.phases()[2].killed), V{6});
  EXPECT_EQ(ranks_where(s.phases()[2].departs), V{5});
  EXPECT_EQ(ranks_where(s.phases()[3].new_process), (V{5, 6}));  // left and killed: new processes
  EXPECT_EQ(ranks_where(s.phases()[3].departs), V{});
  EXPECT_TRUE(s.used_after(2, 5));
  EXPECT_FALSE(s.used_after(3, 5));
  EXPECT_TRUE(s.used(7));
}

TEST(ElasticSchedule, AcrossPlansAProcessEndsWhenTheNextPlanDropsItsRank) {
  // Plan 1 kills rank 1; plan 2 starts without it and brings it back one phase later as a
  // new process; rank 2 runs through all three plans in its first process.
  const ElasticSchedule s(plans_of({"[[0,1,2],[0,-1,2]]", "[[0,2],[0,1,2]]", "[[0,1,2]]"}, 3), 3);
  ASSERT_EQ(s.phases().size(), 5u);
  EXPECT_EQ(s.phases()[2].plan, 1u);
  EXPECT_EQ(s.phases()[2].phase, 0u);
  EXPECT_EQ(ranks_where(s.phases()[2].departs), V{});       // rank 1 was killed, not a survivor
  EXPECT_EQ(ranks_where(s.phases()[2].new_process), V{});   // rank 2 goes on in its process
  EXPECT_EQ(ranks_where(s.phases()[3].new_process), V{1});  // killed in plan 1: a new process in plan 2
  EXPECT_EQ(ranks_where(s.phases()[4].new_process), V{});   // survivor of plan 2 goes on in plan 3
  EXPECT_EQ(ranks_where(s.phases()[4].departs), V{});
}

TEST(ElasticSchedule, ARankThatLeavesAtAPlanBoundaryComesBackAsANewProcess) {
  const ElasticSchedule s(plans_of({"[[0,1]]", "[[0],[0,1]]"}, 2), 2);
  ASSERT_EQ(s.phases().size(), 3u);
  EXPECT_EQ(ranks_where(s.phases()[1].departs), V{1});  // plan 2's first phase omits it
  // Plan 2's own derivation sees rank 1 join for the first time; its process has ended.
  EXPECT_EQ(ranks_where(s.phases()[2].new_process), V{1});
  // Killed in one plan and active from the first phase of the next: a new process at once.
  const ElasticSchedule k(plans_of({"[[0,1],[0,-1]]", "[[0,1]]"}, 2), 2);
  EXPECT_EQ(ranks_where(k.phases()[2].new_process), V{1});
  EXPECT_EQ(ranks_where(k.phases()[2].departs), V{});
}

TEST(ElasticSchedule, StagedRanksGetTheirFirstProcessWithTheirFirstPhase) {
  const auto plans = plans_of({"[[0,1],[0,1,2,3],[0,-1,2,3],[0,1,2,3]]"}, 4);
  EXPECT_EQ(launch_start_ranks(plans.front(), 2), (V{0, 1}));
  const ElasticSchedule s(plans, 4, {1, 1, 0, 0});
  EXPECT_TRUE(s.started_at_launch(1));
  EXPECT_FALSE(s.started_at_launch(2));
  EXPECT_EQ(ranks_where(s.phases()[0].new_process), V{});
  EXPECT_EQ(ranks_where(s.phases()[1].new_process), (V{2, 3}));
  EXPECT_EQ(ranks_where(s.phases()[3].new_process), V{1});
}

TEST(ElasticSchedule, UnusedRanksAreNotUsed) {
  const ElasticSchedule s(plans_of({"[[0,2]]"}, 4), 4);
  EXPECT_FALSE(s.used(1));
  EXPECT_FALSE(s.used(3));
  EXPECT_TRUE(s.used(2));
}

}  // namespace
}  // namespace hyrun::ep::elastic
