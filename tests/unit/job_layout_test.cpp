#include "hyrun/common/job_layout.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "refusal.hpp"

namespace hyrun {
namespace {

TEST(JobLayout, UniformTasksHoldConsecutiveRanksEachOnItsOwnNode) {
  const JobLayout layout = JobLayout::uniform(3, 4);
  EXPECT_EQ(layout.tasks(), 3);
  EXPECT_EQ(layout.nodes(), 3);
  EXPECT_EQ(layout.world_size(), 12);
  for (int rank = 0; rank < 12; ++rank) {
    EXPECT_EQ(layout.task_of(rank), rank / 4) << rank;
    EXPECT_EQ(layout.local_rank(rank), rank % 4) << rank;
    EXPECT_EQ(layout.node_of(rank), rank / 4) << rank;
    EXPECT_EQ(layout.node_local_rank(rank), rank % 4) << rank;
    EXPECT_EQ(layout.global_rank(rank / 4, rank % 4), rank) << rank;
  }
  EXPECT_EQ(layout.ranks_on_node(1), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(layout.describe_task(2, "n3"), "ranks 8-11 on n3");
  EXPECT_EQ(JobLayout::uniform(2, 1).describe_task(1, "n2"), "rank 1 on n2");
}

// Random counts and random groupings of tasks on nodes: every rank is held by exactly one
// task, the conversions invert each other, and a node's ranks are its tasks' in task order.
TEST(JobLayout, AnyCountsAndGroupingAgreeWithACountByHand) {
  std::mt19937 random(36);
  for (int trial = 0; trial < 200; ++trial) {
    const int tasks = 1 + static_cast<int>(random() % 12);
    std::vector<int> counts, nodes;
    int next_node = 0;
    for (int t = 0; t < tasks; ++t) {
      counts.push_back(1 + static_cast<int>(random() % 9));
      const bool new_node = t == 0 || random() % 2 == 0;
      nodes.push_back(new_node ? next_node++ : static_cast<int>(random() % static_cast<unsigned>(next_node)));
    }
    const JobLayout layout = JobLayout::of_tasks(counts, nodes);
    ASSERT_EQ(layout.nodes(), next_node);
    std::vector<int> holder, node_local, per_node(static_cast<std::size_t>(next_node), 0);
    for (int t = 0; t < tasks; ++t)
      for (int i = 0; i < counts[static_cast<std::size_t>(t)]; ++i) {
        holder.push_back(t);
        node_local.push_back(per_node[static_cast<std::size_t>(nodes[static_cast<std::size_t>(t)])]++);
      }
    ASSERT_EQ(layout.world_size(), static_cast<int>(holder.size()));
    for (int rank = 0; rank < layout.world_size(); ++rank) {
      const int t = holder[static_cast<std::size_t>(rank)];
      ASSERT_EQ(layout.task_of(rank), t) << "trial " << trial << " rank " << rank;
      ASSERT_EQ(layout.global_rank(t, layout.local_rank(rank)), rank);
      ASSERT_EQ(layout.node_of(rank), nodes[static_cast<std::size_t>(t)]);
      ASSERT_EQ(layout.node_local_rank(rank), node_local[static_cast<std::size_t>(rank)]);
    }
    for (int n = 0; n < next_node; ++n) {
      std::vector<int> expected;
      for (int rank = 0; rank < layout.world_size(); ++rank)
        if (nodes[static_cast<std::size_t>(holder[static_cast<std::size_t>(rank)])] == n) expected.push_back(rank);
      ASSERT_EQ(layout.ranks_on_node(n), expected) << "trial " << trial << " node " << n;
    }
  }
}

using test_support::refusal;

TEST(JobLayout, BadLayoutsAndRanksOutsideTheJobAreRefusedByName) {
  EXPECT_EQ(refusal([] { JobLayout::uniform(0, 4); }), "a job has at least one task, not 0");
  EXPECT_EQ(refusal([] {
              JobLayout::of_tasks({2, 0}, {0, 1});
            }),
            "task 1 of the job starts 0 ranks: at least 1 is needed");
  EXPECT_EQ(refusal([] {
              JobLayout::of_tasks({2, 2}, {0, 2});
            }),
            "task 1 is on node 2: nodes are numbered from 0 in the order of their first task (the next new node is 1)");
  EXPECT_EQ(refusal([] {
              JobLayout::of_tasks({2}, {0, 1});
            }),
            "a job layout of 1 task counts and 2 task nodes: one of each a task");
  EXPECT_NE(refusal([] { JobLayout::of_tasks({0x40000000, 0x40000000}, {0, 1}); }), "");
  const JobLayout layout = JobLayout::uniform(2, 3);
  EXPECT_EQ(refusal([&] { layout.task_of(6); }), "rank 6 is not one of the job's 6 ranks");
  EXPECT_EQ(refusal([&] { layout.task_of(-1); }), "rank -1 is not one of the job's 6 ranks");
  EXPECT_EQ(refusal([&] { layout.task(2); }), "task 2 is not one of the job's 2 tasks");
  EXPECT_EQ(refusal([&] { layout.global_rank(1, 3); }), "local rank 3 is not one of task 1's 3 ranks");
}

}  // namespace
}  // namespace hyrun
