// Expected plans on the generated fixtures (see make_topology_fixtures.py for their shape).
#include "hyrun/binding/binding_plan.hpp"

#include <gtest/gtest.h>

#include <set>

#include "fixtures.hpp"
#include "hyrun/binding/cpu_list.hpp"
#include "hyrun/common/error.hpp"

using namespace hyrun::binding;
using namespace hyrun::binding::test;

namespace {

const std::vector<std::string> kDgxBuses{"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
                                         "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"};
const std::vector<std::string> kDgxNics{"mlx5_0", "mlx5_3", "mlx5_4",  "mlx5_5",
                                        "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"};

std::string env_value(const RankPlacement& p, const std::string& name) {
  for (const auto& [k, v] : p.environment)
    if (k == name) return v;
  return "<unset>";
}

// 112 cores, hyperthread of core c is c+112: cores [first, first+count) with their siblings.
std::string dgx_cores(int first, int count) {
  return std::to_string(first) + "-" + std::to_string(first + count - 1) + "," + std::to_string(first + 112) + "-" +
         std::to_string(first + count - 1 + 112);
}

}  // namespace

TEST(BindingPlanDgx, EightRanksGetTheirGpuLocalCoresNicAndNuma) {
  for (const char* file : {"dgx-h100.xml", "dgx-h100-bare.xml"}) {
    SCOPED_TRACE(file);
    const auto plan = BindingPlan::compute(on(file), 8, env_of());
    EXPECT_FALSE(plan.is_this_system());
    ASSERT_EQ(plan.ranks().size(), 8u);
    std::set<int> gpus;
    std::set<int> all_cpus;
    std::size_t cpu_count = 0;
    for (int i = 0; i < 8; ++i) {
      const auto& p = plan.ranks()[static_cast<std::size_t>(i)];
      ASSERT_EQ(p.gpus.size(), 1u);
      EXPECT_EQ(p.gpus[0].index, i);
      EXPECT_EQ(p.gpus[0].pci_bus_id, kDgxBuses[static_cast<std::size_t>(i)]);
      gpus.insert(p.gpus[0].index);
      // 56 cores per socket split among its 4 ranks: 14 whole cores (28 PUs) each.
      const int socket = i / 4;
      EXPECT_EQ(format_cpu_list(p.cpus), dgx_cores(socket * 56 + (i % 4) * 14, 14));
      cpu_count += p.cpus.size();
      all_cpus.insert(p.cpus.begin(), p.cpus.end());
      EXPECT_EQ(p.numa_nodes, std::vector<int>{socket});
      EXPECT_TRUE(p.mem_bind);
      ASSERT_EQ(p.nics.size(), 1u);
      EXPECT_EQ(p.nics[0], kDgxNics[static_cast<std::size_t>(i)] + ":1");
      EXPECT_EQ(p.nic_source, "nearest");
      EXPECT_NE(p.reason.find("same PCIe switch"), std::string::npos) << p.reason;
      EXPECT_EQ(env_value(p, "CUDA_VISIBLE_DEVICES"), std::to_string(i));
      EXPECT_EQ(env_value(p, "CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
      EXPECT_EQ(env_value(p, "UCX_NET_DEVICES"), kDgxNics[static_cast<std::size_t>(i)] + ":1");
      EXPECT_TRUE(p.notes.empty());
    }
    EXPECT_EQ(gpus.size(), 8u);
    EXPECT_EQ(all_cpus.size(), cpu_count) << "partitions overlap";
  }
}

TEST(BindingPlanDgx, OsDeviceFixtureCarriesUuids) {
  const auto plan = BindingPlan::compute(on("dgx-h100.xml"), 1, env_of());
  EXPECT_EQ(plan.ranks()[0].gpus[0].uuid, "GPU-5a000000-1c2d-3e4f-5a6b-000000000000");
}

TEST(BindingPlanDgx, SlurmCudaVisibleDevicesIndexes) {
  const auto plan = BindingPlan::compute(on("dgx-h100.xml"), 2, env_of({{"CUDA_VISIBLE_DEVICES", "2,3"}}));
  const auto& r = plan.ranks();
  EXPECT_EQ(r[0].gpus[0].index, 2);
  EXPECT_EQ(r[1].gpus[0].index, 3);
  EXPECT_EQ(env_value(r[0], "CUDA_VISIBLE_DEVICES"), "2");
  EXPECT_EQ(env_value(r[1], "CUDA_VISIBLE_DEVICES"), "3");
  EXPECT_EQ(r[0].nics, std::vector<std::string>{"mlx5_4:1"});
  EXPECT_EQ(r[1].nics, std::vector<std::string>{"mlx5_5:1"});
  // Both GPUs are on socket 0: its 56 cores are split in two.
  EXPECT_EQ(format_cpu_list(r[0].cpus), dgx_cores(0, 28));
  EXPECT_EQ(format_cpu_list(r[1].cpus), dgx_cores(28, 28));
}

TEST(BindingPlanDgx, SlurmCudaVisibleDevicesUuids) {
  const std::string u5 = "GPU-5a000555-1c2d-3e4f-5a6b-000000000005";
  const std::string u6 = "GPU-5a000666-1c2d-3e4f-5a6b-000000000006";
  const auto plan = BindingPlan::compute(on("dgx-h100.xml"), 2, env_of({{"CUDA_VISIBLE_DEVICES", u5 + "," + u6}}));
  EXPECT_EQ(plan.ranks()[0].gpus[0].index, 5);
  EXPECT_EQ(plan.ranks()[1].gpus[0].index, 6);
  EXPECT_EQ(env_value(plan.ranks()[0], "CUDA_VISIBLE_DEVICES"), u5);
  EXPECT_EQ(plan.ranks()[1].nics, std::vector<std::string>{"mlx5_10:1"});
}

TEST(BindingPlanDgx, GpusOptionNarrowsCudaVisibleDevices) {
  auto o = on("dgx-h100.xml");
  o.gpus = "3";
  const auto plan = BindingPlan::compute(o, 1, env_of({{"CUDA_VISIBLE_DEVICES", "2,3"}}));
  EXPECT_EQ(plan.ranks()[0].gpus[0].index, 3);
}

TEST(BindingPlanDgx, RestrictedCpuSetIsHonoured) {
  auto o = on("dgx-h100.xml");
  o.cpus_allowed = "0-7,112-119";
  const auto plan = BindingPlan::compute(o, 2, env_of({{"CUDA_VISIBLE_DEVICES", "0,1"}}));
  EXPECT_EQ(format_cpu_list(plan.ranks()[0].cpus), "0-3,112-115");
  EXPECT_EQ(format_cpu_list(plan.ranks()[1].cpus), "4-7,116-119");
}

TEST(BindingPlanDgx, RestrictionAwayFromTheGpuFallsBackWithANote) {
  auto o = on("dgx-h100.xml");
  o.cpus_allowed = "56-59";  // socket 1, but GPU 0 sits on socket 0
  const auto plan = BindingPlan::compute(o, 1, env_of());
  EXPECT_EQ(format_cpu_list(plan.ranks()[0].cpus), "56-59");
  ASSERT_EQ(plan.ranks()[0].notes.size(), 1u);
  EXPECT_NE(plan.ranks()[0].notes[0].find("none of the CPUs local to GPU 0"), std::string::npos);
}

TEST(BindingPlanDgx, BindToNumaCoreNone) {
  auto o = on("dgx-h100.xml");
  o.bind_to = BindTo::kNuma;
  auto plan = BindingPlan::compute(o, 8, env_of());
  EXPECT_EQ(format_cpu_list(plan.ranks()[1].cpus), "0-55,112-167");
  EXPECT_EQ(format_cpu_list(plan.ranks()[5].cpus), "56-111,168-223");
  o.bind_to = BindTo::kCore;
  plan = BindingPlan::compute(o, 8, env_of());
  EXPECT_EQ(format_cpu_list(plan.ranks()[0].cpus), "0,112");
  EXPECT_EQ(format_cpu_list(plan.ranks()[1].cpus), "14,126");
  o.bind_to = BindTo::kNone;
  plan = BindingPlan::compute(o, 8, env_of());
  EXPECT_TRUE(plan.ranks()[0].cpus.empty());
  EXPECT_FALSE(plan.ranks()[0].mem_bind);
}

TEST(BindingPlanDgx, CpuMapAndMemBindOff) {
  auto o = on("dgx-h100.xml");
  o.cpu_map = "0-3:4-7";
  o.mem_bind = false;
  const auto plan = BindingPlan::compute(o, 2, env_of());
  EXPECT_EQ(format_cpu_list(plan.ranks()[1].cpus), "4-7");
  EXPECT_EQ(plan.ranks()[1].cpu_policy, "cpu-map");
  EXPECT_FALSE(plan.ranks()[1].mem_bind);
  EXPECT_EQ(plan.ranks()[1].numa_nodes, std::vector<int>{0});
}

TEST(BindingPlanDgx, MultiGpuRanksGetEachGpusNic) {
  auto o = on("dgx-h100.xml");
  o.gpus_per_rank = 2;
  const auto plan = BindingPlan::compute(o, 4, env_of());
  const auto& r = plan.ranks()[1];
  ASSERT_EQ(r.gpus.size(), 2u);
  EXPECT_EQ(r.gpus[0].index, 2);
  EXPECT_EQ(r.gpus[1].index, 3);
  EXPECT_EQ(env_value(r, "CUDA_VISIBLE_DEVICES"), "2,3");
  EXPECT_EQ(env_value(r, "UCX_NET_DEVICES"), "mlx5_4:1,mlx5_5:1");
  EXPECT_EQ(format_cpu_list(r.cpus), dgx_cores(28, 28));
}

TEST(BindingPlanDgx, OversubscribeGoesRoundRobinAndSaysItSharesNics) {
  auto o = on("dgx-h100.xml");
  o.oversubscribe = true;
  const auto plan = BindingPlan::compute(o, 9, env_of());
  EXPECT_EQ(plan.ranks()[8].gpus[0].index, 0);
  EXPECT_EQ(plan.ranks()[8].nics, std::vector<std::string>{"mlx5_0:1"});
  ASSERT_EQ(plan.ranks()[0].notes.size(), 2u);
  EXPECT_EQ(plan.ranks()[8].notes[0], "GPU 0 shared by local ranks 0,8");
  EXPECT_EQ(plan.ranks()[0].notes[1], "NIC mlx5_0:1 is shared by local ranks 0,8");
  EXPECT_NE(plan.ranks()[8].reason.find("shared round-robin"), std::string::npos);
  EXPECT_EQ(plan.ranks()[1].reason.find("shared round-robin"), std::string::npos);
  EXPECT_TRUE(plan.ranks()[1].notes.empty());
}

TEST(BindingPlanDgx, EvenSharingUpToEightRanksPerGpuNeedsNoFlag) {
  // The single-GPU machine of the EP runs: 8 ranks on one GPU, as bench/gpu.sh starts them.
  const auto one = BindingPlan::compute(on("dgx-h100.xml"), 8, env_of({{"CUDA_VISIBLE_DEVICES", "2"}}));
  for (const auto& r : one.ranks()) {
    ASSERT_EQ(r.gpus.size(), 1u);
    EXPECT_EQ(r.gpus[0].index, 2);
    EXPECT_EQ(r.notes.at(0), "GPU 2 shared by local ranks 0,1,2,3,4,5,6,7");
  }
  // 16 ranks on 2 GPUs: 8 each, alternating as --oversubscribe would.
  const auto two = BindingPlan::compute(on("dgx-h100.xml"), 16, env_of({{"CUDA_VISIBLE_DEVICES", "2,3"}}));
  EXPECT_EQ(two.ranks()[14].gpus[0].index, 2);
  EXPECT_EQ(two.ranks()[15].gpus[0].index, 3);
}

TEST(BindingPlanDgx, UserUcxNetDevicesIsLeftAlone) {
  const auto plan = BindingPlan::compute(on("dgx-h100.xml"), 2, env_of({{"UCX_NET_DEVICES", "mlx5_1:1"}}));
  EXPECT_EQ(plan.ranks()[0].nic_source, "user-set");
  EXPECT_EQ(plan.ranks()[0].nics, std::vector<std::string>{"mlx5_1:1"});
  EXPECT_EQ(env_value(plan.ranks()[0], "UCX_NET_DEVICES"), "<unset>");
  EXPECT_NE(plan.ranks()[0].reason.find("user-set"), std::string::npos);
}

TEST(BindingPlanDgx, NicsOptionRestrictsToTheStorageNics) {
  auto o = on("dgx-h100.xml");
  o.nics = "mlx5_1,mlx5_2";
  const auto plan = BindingPlan::compute(o, 8, env_of());
  EXPECT_EQ(plan.ranks()[0].nics, std::vector<std::string>{"mlx5_1:1"});  // same package as GPU 0
  EXPECT_EQ(plan.ranks()[7].nics, std::vector<std::string>{"mlx5_2:1"});
}

TEST(BindingPlanDgx, GpusPerRankZeroGivesCpuOnlyRanksWithHiddenGpus) {
  auto o = on("dgx-h100.xml");
  o.gpus_per_rank = 0;
  const auto plan = BindingPlan::compute(o, 2, env_of());
  EXPECT_TRUE(plan.ranks()[0].gpus.empty());
  EXPECT_EQ(env_value(plan.ranks()[0], "CUDA_VISIBLE_DEVICES"), "");
  EXPECT_EQ(format_cpu_list(plan.ranks()[0].cpus), dgx_cores(0, 56));
}

TEST(BindingPlanSharedNic, TwoGpusShareOneNicAndItIsNoted) {
  const auto plan = BindingPlan::compute(on("shared-nic.xml"), 4, env_of());
  const auto& r = plan.ranks();
  EXPECT_EQ(r[0].nics, std::vector<std::string>{"mlx5_0:2"});  // port 1 is down, port 2 active
  EXPECT_EQ(r[1].nics, std::vector<std::string>{"mlx5_0:2"});
  EXPECT_EQ(r[2].nics, std::vector<std::string>{"mlx5_1:1"});
  EXPECT_EQ(r[3].nics, std::vector<std::string>{"mlx5_1:1"});
  ASSERT_EQ(r[1].notes.size(), 1u);
  EXPECT_EQ(r[1].notes[0], "NIC mlx5_0:2 is shared by local ranks 0,1");
  // 16 cores (HT siblings c+16) split four ways.
  EXPECT_EQ(format_cpu_list(r[2].cpus), "8-11,24-27");
}

TEST(BindingPlanGrace, NoHyperthreadsOneNumaPerSocketNicOnSameHostBridge) {
  const auto plan = BindingPlan::compute(on("grace.xml"), 4, env_of());
  const auto& r = plan.ranks();
  EXPECT_EQ(format_cpu_list(r[0].cpus), "0-35");
  EXPECT_EQ(format_cpu_list(r[1].cpus), "36-71");
  EXPECT_EQ(format_cpu_list(r[2].cpus), "72-107");
  EXPECT_EQ(format_cpu_list(r[3].cpus), "108-143");
  EXPECT_EQ(r[2].numa_nodes, std::vector<int>{1});
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(r[static_cast<std::size_t>(i)].nics, std::vector<std::string>{"mlx5_" + std::to_string(i) + ":1"});
    EXPECT_NE(r[static_cast<std::size_t>(i)].reason.find("same host bridge"), std::string::npos);
  }
}

TEST(BindingPlanNoNic, RanksGetNoNicAndNoUcxVariable) {
  const auto plan = BindingPlan::compute(on("no-nic.xml"), 4, env_of());
  for (const auto& p : plan.ranks()) {
    EXPECT_TRUE(p.nics.empty());
    EXPECT_EQ(p.nic_source, "none");
    EXPECT_EQ(env_value(p, "UCX_NET_DEVICES"), "<unset>");
  }
  EXPECT_EQ(format_cpu_list(plan.ranks()[2].cpus), "8-11,24-27");
}

TEST(BindingPlanNoGpu, CpuOnlyRanksSpreadOverAllCoresWithLocalNics) {
  const auto plan = BindingPlan::compute(on("no-gpu.xml"), 4, env_of());
  const auto& r = plan.ranks();
  for (int i = 0; i < 4; ++i) {
    const auto& p = r[static_cast<std::size_t>(i)];
    EXPECT_TRUE(p.gpus.empty());
    EXPECT_EQ(format_cpu_list(p.cpus), std::to_string(8 * i) + "-" + std::to_string(8 * i + 7));
    EXPECT_EQ(p.numa_nodes, std::vector<int>{i});
    EXPECT_EQ(env_value(p, "CUDA_VISIBLE_DEVICES"), "<unset>");
  }
  EXPECT_EQ(r[1].nics, std::vector<std::string>{"mlx5_0:1"});
  EXPECT_EQ(r[2].nics, std::vector<std::string>{"mlx5_1:1"});
}

TEST(BindingPlanSynthetic, SyntheticDescriptionWorks) {
  auto o = on("");
  o.topology = "pack:2 numa:2 core:8 pu:2";
  const auto plan = BindingPlan::compute(o, 2, env_of());
  EXPECT_EQ(format_cpu_list(plan.ranks()[0].cpus), "0-31");
  EXPECT_EQ(plan.ranks()[0].numa_nodes, (std::vector<int>{0, 1}));
}

TEST(BindingReport, JsonHasTheDocumentedKeys) {
  const auto plan = BindingPlan::compute(on("dgx-h100.xml"), 8, env_of());
  const auto j = plan.report_json(16);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 8u);
  for (const char* key : {"rank", "local_rank", "gpus", "cpus", "numa_nodes", "nics", "reason", "cpu_list",
                          "cpu_policy", "mem_bind", "nic_source", "notes", "environment", "topology", "this_system"})
    EXPECT_TRUE(j[3].contains(key)) << key;
  EXPECT_EQ(j[3]["rank"], 19);
  EXPECT_EQ(j[3]["local_rank"], 3);
  EXPECT_EQ(j[3]["gpus"][0]["index"], 3);
  EXPECT_EQ(j[3]["gpus"][0]["pci_bus_id"], "0000:5d:00.0");
  EXPECT_EQ(j[3]["nics"][0], "mlx5_5:1");
  EXPECT_EQ(j[3]["numa_nodes"][0], 0);
  EXPECT_EQ(j[3]["cpus"].size(), 28u);
}

TEST(BindingReport, TableShowsEveryRank) {
  const auto plan = BindingPlan::compute(on("dgx-h100.xml"), 8, env_of());
  const std::string t = plan.report_table(8);
  EXPECT_NE(t.find("RANK"), std::string::npos);
  EXPECT_NE(t.find("PCI BUS ID"), std::string::npos);
  EXPECT_NE(t.find("0000:db:00.0"), std::string::npos);
  EXPECT_NE(t.find("mlx5_11:1"), std::string::npos);
  EXPECT_NE(t.find("\n15 "), std::string::npos) << t;
}

TEST(BindingPlanForeign, RefusesToApplyAnotherMachinesPlan) {
  const auto plan = BindingPlan::compute(on("dgx-h100.xml"), 1, env_of());
  try {
    (void)plan.child_binding(0);
    FAIL();
  } catch (const hyrun::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--dry-run"), std::string::npos) << e.what();
  }
}

TEST(BindingPlanDgx, NicsOptionMayNameThePort) {
  auto o = on("dgx-h100.xml");
  o.nics = "mlx5_0:2";
  const auto plan = BindingPlan::compute(o, 1, env_of());
  EXPECT_EQ(plan.ranks()[0].nics, std::vector<std::string>{"mlx5_0:2"});
  o.nics = "mlx5_0:x";
  EXPECT_THROW(BindingPlan::compute(o, 1, env_of()), hyrun::UsageError);
}
