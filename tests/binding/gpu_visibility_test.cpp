// GPUs under Slurm's ConstrainDevices: the task's physical GPUs come from the device nodes it
// can open and the driver's minor -> PCI bus id table; CUDA_VISIBLE_DEVICES counts within them.
#include "hyrun/binding/gpu_visibility.hpp"

#include <gtest/gtest.h>

#include "device_fixture.hpp"
#include "fixtures.hpp"
#include "hyrun/binding/binding_plan.hpp"
#include "hyrun/binding/cpu_list.hpp"
#include "hyrun/common/error.hpp"

using namespace hyrun::binding;
using namespace hyrun::binding::test;

namespace {

const std::vector<std::string> kBus{"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
                                    "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"};

std::map<int, std::string> minors_in_pci_order() {
  std::map<int, std::string> m;
  for (int i = 0; i < 8; ++i) m[i] = kBus[static_cast<std::size_t>(i)];
  return m;
}

std::string env_value(const RankPlacement& p, const std::string& name) {
  for (const auto& [k, v] : p.environment)
    if (k == name) return v;
  return "<unset>";
}

BindingOptions dgx_with(const DeviceFixture& devices) {
  BindingOptions o = on("dgx-h100.xml");
  o.device_roots = devices.roots();
  return o;
}

}  // namespace

TEST(GpuVisibility, ConstrainedTaskBindsToItsPhysicalGpusWithRenumberedIds) {
  // Slurm gave the task GPUs 2 and 3 and renumbered them 0,1 (ConstrainDevices=yes).
  const DeviceFixture devices(minors_in_pci_order(), {2, 3});
  const auto plan =
      BindingPlan::compute(dgx_with(devices), 2, env_of({{"CUDA_VISIBLE_DEVICES", "0,1"}, {"SLURM_STEP_GPUS", "2,3"}}));
  ASSERT_EQ(plan.ranks().size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const auto& p = plan.ranks()[static_cast<std::size_t>(i)];
    ASSERT_EQ(p.gpus.size(), 1u);
    EXPECT_EQ(p.gpus[0].index, 2 + i);  // the physical GPU, for CPU and NIC locality
    EXPECT_EQ(p.gpus[0].pci_bus_id, kBus[static_cast<std::size_t>(2 + i)]);
    EXPECT_EQ(env_value(p, "CUDA_VISIBLE_DEVICES"), std::to_string(i));  // the rank's CUDA sees the same 2 GPUs
    EXPECT_EQ(p.nics, std::vector<std::string>{i == 0 ? "mlx5_4:1" : "mlx5_5:1"});
    EXPECT_EQ(p.numa_nodes, std::vector<int>{0});
  }
  EXPECT_EQ(format_cpu_list(plan.ranks()[0].cpus), "0-27,112-139");
}

TEST(GpuVisibility, MinorsOutOfPciOrderAreNumberedInPciOrderWithoutCudaVisibleDevices) {
  // Minor 0 is the GPU at ab:00.0 (ordinal 5), minor 1 the one at 2a:00.0 (ordinal 1): CUDA
  // (CUDA_DEVICE_ORDER=PCI_BUS_ID) calls ordinal 1 device 0 and ordinal 5 device 1.
  std::map<int, std::string> minors = minors_in_pci_order();
  std::swap(minors[0], minors[5]);
  const DeviceFixture devices(minors, {0, 1});
  const auto plan = BindingPlan::compute(dgx_with(devices), 2, env_of());
  EXPECT_EQ(plan.ranks()[0].gpus.at(0).index, 1);
  EXPECT_EQ(env_value(plan.ranks()[0], "CUDA_VISIBLE_DEVICES"), "0");
  EXPECT_EQ(plan.ranks()[1].gpus.at(0).index, 5);
  EXPECT_EQ(env_value(plan.ranks()[1], "CUDA_VISIBLE_DEVICES"), "1");
  EXPECT_NE(plan.ranks()[1].notes.back().find("only minors 0-1 can be opened"), std::string::npos)
      << plan.ranks()[1].notes.back();
}

TEST(GpuVisibility, WithoutAConstraintIndexesAreNodeWide) {
  const DeviceFixture devices(minors_in_pci_order(), {0, 1, 2, 3, 4, 5, 6, 7});
  const auto plan = BindingPlan::compute(dgx_with(devices), 2, env_of({{"CUDA_VISIBLE_DEVICES", "6,7"}}));
  EXPECT_EQ(plan.ranks()[0].gpus.at(0).index, 6);
  EXPECT_EQ(env_value(plan.ranks()[0], "CUDA_VISIBLE_DEVICES"), "6");
  EXPECT_EQ(plan.ranks()[1].gpus.at(0).index, 7);
}

TEST(GpuVisibility, GpuDeviceOrdinalStandsInForCudaVisibleDevices) {
  const DeviceFixture devices(minors_in_pci_order(), {4, 5});
  const auto plan = BindingPlan::compute(dgx_with(devices), 1, env_of({{"GPU_DEVICE_ORDINAL", "1"}}));
  EXPECT_EQ(plan.ranks()[0].gpus.at(0).index, 5);
  EXPECT_EQ(env_value(plan.ranks()[0], "CUDA_VISIBLE_DEVICES"), "1");
}

TEST(GpuVisibility, IndexBeyondTheTasksGpusIsNamed) {
  const DeviceFixture devices(minors_in_pci_order(), {2, 3});
  try {
    BindingPlan::compute(dgx_with(devices), 1, env_of({{"CUDA_VISIBLE_DEVICES", "2"}}));
    FAIL() << "accepted a GPU the task cannot open";
  } catch (const hyrun::UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("GPU '2' in CUDA_VISIBLE_DEVICES '2'"), std::string::npos) << what;
    EXPECT_NE(what.find("can open 2 of the node's 8 GPUs"), std::string::npos) << what;
  }
}

TEST(GpuVisibility, NoOpenableGpuGivesCpuOnlyRanks) {
  const DeviceFixture devices(minors_in_pci_order(), {});
  const auto plan = BindingPlan::compute(dgx_with(devices), 2, env_of());
  EXPECT_TRUE(plan.ranks()[0].gpus.empty());
  EXPECT_TRUE(plan.ranks()[1].gpus.empty());
}

TEST(GpuVisibility, ReadsTheDriverTableAndMissingFilesMeanNoConstraint) {
  std::map<int, std::string> minors{{3, "0000:DB:00.0"}, {0, "0000:18:00.0"}};
  const DeviceFixture devices(minors, {3});
  const auto view = read_task_gpu_view(devices.roots());
  ASSERT_EQ(view.driver_gpus.size(), 2u);
  EXPECT_EQ(view.driver_gpus[1].minor, 3);
  EXPECT_EQ(view.driver_gpus[1].pci_bus_id, "0000:db:00.0");  // lower case, as hwloc writes it
  EXPECT_TRUE(view.constrained);
  EXPECT_EQ(view.visible_bus_ids, std::vector<std::string>{"0000:db:00.0"});
  const auto none = read_task_gpu_view(SystemRoots{"/nonexistent/dev", "/nonexistent/proc"});
  EXPECT_FALSE(none.constrained);
  EXPECT_TRUE(none.driver_gpus.empty());
}
