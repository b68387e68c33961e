// Plans on topologies saved from real machines (tests/binding/machines/README.md), where
// the same plans were checked from inside the ranks (bench/gpu-binding.sh): a change of
// the planner that would give those machines another binding fails here.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fixtures.hpp"
#include "hyrun/binding/binding_plan.hpp"
#include "hyrun/binding/cpu_list.hpp"

using namespace hyrun::binding;
using namespace hyrun::binding::test;

namespace {

BindingOptions on_machine(const std::string& file) {
  BindingOptions o;
  o.topology = std::string(HYRUN_BINDING_MACHINES_DIR) + "/" + file;
  return o;
}

std::string env_value(const RankPlacement& p, const std::string& name) {
  for (const auto& [k, v] : p.environment)
    if (k == name) return v;
  return "<unset>";
}

}  // namespace

// Measured on 2026-11-22: for N ranks, rank i saw GPU 0000:00:06.0, CPUs [i*16/N, (i+1)*16/N)
// and memory node 0, exactly as planned.
TEST(BindingPlanMeasuredH100Vm, RanksShareTheGpuAndSplitItsSixteenCores) {
  const std::vector<std::vector<std::string>> measured{{"0-15"},
                                                       {"0-7", "8-15"},
                                                       {"0-3", "4-7", "8-11", "12-15"},
                                                       {"0-1", "2-3", "4-5", "6-7", "8-9", "10-11", "12-13", "14-15"}};
  for (const auto& cpus : measured) {
    const int n = static_cast<int>(cpus.size());
    SCOPED_TRACE(n);
    const auto plan = BindingPlan::compute(on_machine("h100-vm.xml"), n, env_of());
    ASSERT_EQ(plan.ranks().size(), cpus.size());
    for (int i = 0; i < n; ++i) {
      const auto& p = plan.ranks()[static_cast<std::size_t>(i)];
      ASSERT_EQ(p.gpus.size(), 1u);
      EXPECT_EQ(p.gpus[0].pci_bus_id, "0000:00:06.0");
      EXPECT_EQ(env_value(p, "CUDA_VISIBLE_DEVICES"), "0");
      EXPECT_EQ(format_cpu_list(p.cpus), cpus[static_cast<std::size_t>(i)]);
      EXPECT_EQ(p.numa_nodes, std::vector<int>{0});
      EXPECT_TRUE(p.nics.empty());
    }
  }
}
