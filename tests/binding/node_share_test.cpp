// Two hyrun tasks of one job on one node: they split what Slurm did not give each alone.
#include "hyrun/binding/node_share.hpp"

#include <gtest/gtest.h>

#include <set>

#include "fixtures.hpp"
#include "hyrun/binding/binding_plan.hpp"
#include "hyrun/binding/cpu_list.hpp"

using namespace hyrun::binding;
using namespace hyrun::binding::test;

namespace {

BindingOptions task_of_two(int index, const std::string& fixture_name = "dgx-h100.xml") {
  BindingOptions o = on(fixture_name);
  o.node_share = {index, 2};
  return o;
}

std::set<int> gpus_of(const BindingPlan& plan) {
  std::set<int> out;
  for (const auto& r : plan.ranks())
    for (const auto& g : r.gpus) out.insert(g.index);
  return out;
}

std::set<int> cpus_of(const BindingPlan& plan) {
  std::set<int> out;
  for (const auto& r : plan.ranks()) out.insert(r.cpus.begin(), r.cpus.end());
  return out;
}

bool disjoint(const std::set<int>& a, const std::set<int>& b) {
  for (int x : a)
    if (b.count(x)) return false;
  return true;
}

}  // namespace

TEST(NodeShare, TwoTasksOnANodeSplitItsGpusAndCpusDisjointly) {
  const auto first = BindingPlan::compute(task_of_two(0), 4, env_of());
  const auto second = BindingPlan::compute(task_of_two(1), 4, env_of());
  EXPECT_EQ(gpus_of(first), (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(gpus_of(second), (std::set<int>{4, 5, 6, 7}));
  EXPECT_TRUE(disjoint(cpus_of(first), cpus_of(second)));
  // Each task's GPUs sit on one package, and the split of cores follows packages.
  EXPECT_EQ(format_cpu_list(first.ranks()[0].cpus), "0-13,112-125");
  EXPECT_EQ(format_cpu_list(second.ranks()[0].cpus), "56-69,168-181");
  EXPECT_NE(first.ranks()[0].notes.front().find("share 0 of 2 among this job's tasks"), std::string::npos)
      << first.ranks()[0].notes.front();
}

TEST(NodeShare, CpuOnlyTasksSplitTheCores) {
  const auto first = BindingPlan::compute(task_of_two(0, "no-gpu.xml"), 2, env_of());
  const auto second = BindingPlan::compute(task_of_two(1, "no-gpu.xml"), 2, env_of());
  EXPECT_FALSE(cpus_of(first).empty());
  EXPECT_FALSE(cpus_of(second).empty());
  EXPECT_TRUE(disjoint(cpus_of(first), cpus_of(second)));
}

TEST(NodeShare, WhatSlurmGaveEachTaskIsUsedAsGiven) {
  // Slurm bound each task to its own cores (here --cpus-allowed stands in) and gave each
  // its own GPUs: no split.
  BindingOptions o = task_of_two(1);
  o.cpus_allowed = "0-27,112-139";
  const auto plan = BindingPlan::compute(o, 2, env_of({{"CUDA_VISIBLE_DEVICES", "0,1"}, {"SLURM_STEP_GPUS", "0-3"}}));
  EXPECT_EQ(gpus_of(plan), (std::set<int>{0, 1}));
  EXPECT_EQ(format_cpu_list(plan.ranks()[0].cpus), "0-13,112-125");
  EXPECT_TRUE(plan.ranks()[0].notes.empty());
}

TEST(NodeShare, TheStepsWholeGpuListIsSplit) {
  // --gres=gpu:4 with 2 tasks per node: both tasks get CUDA_VISIBLE_DEVICES=SLURM_STEP_GPUS=0,1,2,3.
  const auto env = env_of({{"CUDA_VISIBLE_DEVICES", "0,1,2,3"}, {"SLURM_STEP_GPUS", "0,1,2,3"}});
  EXPECT_EQ(gpus_of(BindingPlan::compute(task_of_two(0), 2, env)), (std::set<int>{0, 1}));
  EXPECT_EQ(gpus_of(BindingPlan::compute(task_of_two(1), 2, env)), (std::set<int>{2, 3}));
}

TEST(NodeShare, ExplicitGpusAndCpuMapAreNotSplit) {
  BindingOptions o = task_of_two(1);
  o.gpus = "0,1";
  o.cpu_map = "0-3:4-7";
  const auto plan = BindingPlan::compute(o, 2, env_of());
  EXPECT_EQ(gpus_of(plan), (std::set<int>{0, 1}));
  EXPECT_EQ(format_cpu_list(plan.ranks()[0].cpus), "0-3");
}

TEST(NodeShare, SharesOfFewCpusAndGpus) {
  const Topology topo = Topology::load_from("pack:1 core:2 pu:2");
  const Bitmap all = Bitmap::copy_of(hwloc_topology_get_allowed_cpuset(topo.get()));
  std::string note;
  std::set<int> seen;
  for (int i = 0; i < 4; ++i) {  // 4 tasks on 2 cores: one PU each
    const auto mine = share_of_cpus(topo, all, {i, 4}, note).indexes();
    ASSERT_EQ(mine.size(), 1u);
    seen.insert(mine[0]);
  }
  EXPECT_EQ(seen.size(), 4u);
  const std::vector<GpuAssignment> one{{0, "0000:18:00.0", "", "0"}};
  EXPECT_EQ(share_of_gpus(one, {1, 2}, note).size(), 1u);
  EXPECT_NE(note.find("every task uses them all"), std::string::npos) << note;
  const std::vector<GpuAssignment> three{{0, "a", "", "0"}, {1, "b", "", "1"}, {2, "c", "", "2"}};
  EXPECT_EQ(share_of_gpus(three, {0, 2}, note).size(), 1u);
  EXPECT_EQ(share_of_gpus(three, {1, 2}, note).size(), 2u);
}
