// Every bad input gives a UsageError whose message names the input and what would be right.
#include <gtest/gtest.h>
#include <sched.h>

#include <cstdio>
#include <fstream>

#include "fixtures.hpp"
#include "hyrun/common/error.hpp"

using namespace hyrun::binding;
using namespace hyrun::binding::test;

namespace {

// The message of the UsageError `f` throws ("" when it throws none).
template <typename F>
std::string usage_error_of(F f) {
  try {
    f();
  } catch (const hyrun::UsageError& e) {
    return e.what();
  }
  return "";
}

std::string error_with(BindingOptions o, int ranks, std::map<std::string, std::string> env = {}) {
  return usage_error_of([&] { BindingPlan::compute(o, ranks, env_of(env)); });
}

#define EXPECT_MESSAGE(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << "message: " << (msg)

}  // namespace

TEST(BindingErrors, UnknownGpuIndex) {
  const auto m = error_with(on("dgx-h100.xml"), 1, {{"CUDA_VISIBLE_DEVICES", "9"}});
  EXPECT_MESSAGE(m, "GPU '9' in CUDA_VISIBLE_DEVICES '9' is unknown");
  EXPECT_MESSAGE(m, "8 GPU(s), indexes 0-7");
  auto o = on("dgx-h100.xml");
  o.gpus = "1,x";
  EXPECT_MESSAGE(error_with(o, 1), "GPU 'x' in --gpus '1,x' is neither a GPU index");
}

TEST(BindingErrors, UnknownUuidAndUuidWithoutTopologySupport) {
  EXPECT_MESSAGE(error_with(on("dgx-h100.xml"), 1, {{"CUDA_VISIBLE_DEVICES", "GPU-ffff"}}), "matches no GPU UUID");
  EXPECT_MESSAGE(error_with(on("dgx-h100-bare.xml"), 1, {{"CUDA_VISIBLE_DEVICES", "GPU-5a000555"}}),
                 "carries no GPU UUIDs");
}

TEST(BindingErrors, MigIsNotSupported) {
  const auto m =
      error_with(on("dgx-h100.xml"), 1, {{"CUDA_VISIBLE_DEVICES", "MIG-7a1b2c3d-0000-1111-2222-333344445555"}});
  EXPECT_MESSAGE(m, "MIG is not supported");
}

TEST(BindingErrors, GpusOutsideCudaVisibleDevices) {
  auto o = on("dgx-h100.xml");
  o.gpus = "5";
  EXPECT_MESSAGE(error_with(o, 1, {{"CUDA_VISIBLE_DEVICES", "2,3"}}),
                 "is not in this task's CUDA_VISIBLE_DEVICES '2,3'");
}

TEST(BindingErrors, DuplicateGpu) {
  EXPECT_MESSAGE(error_with(on("dgx-h100.xml"), 1, {{"CUDA_VISIBLE_DEVICES", "1,1"}}), "list each GPU once");
}

TEST(BindingErrors, MoreRanksThanGpus) {
  const auto m = error_with(on("dgx-h100.xml"), 3, {{"CUDA_VISIBLE_DEVICES", "2,3"}});
  EXPECT_MESSAGE(m, "3 local ranks with --gpus-per-rank 1 need 3 GPUs, but this task may use only 2 (2,3)");
  EXPECT_MESSAGE(m, "--oversubscribe");
  auto o = on("dgx-h100.xml");
  o.gpus_per_rank = 3;
  EXPECT_MESSAGE(error_with(o, 1, {{"CUDA_VISIBLE_DEVICES", "2,3"}}), "lower --gpus-per-rank");
}

TEST(BindingErrors, UnevenOrTooDenseGpuSharingNeedsOversubscribe) {
  // 3 ranks on 2 GPUs would load one GPU twice as much as the other.
  EXPECT_MESSAGE(error_with(on("dgx-h100.xml"), 3, {{"CUDA_VISIBLE_DEVICES", "2,3"}}), "evenly");
  // 9 ranks on one GPU: above the limit of 8 ranks per GPU.
  const auto m = error_with(on("dgx-h100.xml"), 9, {{"CUDA_VISIBLE_DEVICES", "2"}});
  EXPECT_MESSAGE(m, "9 local ranks with --gpus-per-rank 1 need 9 GPUs");
  EXPECT_MESSAGE(m, "at most 8 ranks per GPU");
  EXPECT_MESSAGE(m, "--oversubscribe");
  auto o = on("dgx-h100.xml");
  o.oversubscribe = true;
  EXPECT_EQ(error_with(o, 9, {{"CUDA_VISIBLE_DEVICES", "2"}}), "");
}

TEST(BindingErrors, BadCpuMap) {
  auto o = on("dgx-h100.xml");
  o.cpu_map = "0-3:x";
  EXPECT_MESSAGE(error_with(o, 2), "--cpu-map entry 1 of '0-3:x'");
  o.cpu_map = "0-3";
  EXPECT_MESSAGE(error_with(o, 2), "has 1 entries for 2 local ranks");
  o.cpu_map = "0-3:500";
  EXPECT_MESSAGE(error_with(o, 2), "has CPU 500, which this task may not use");
  o.cpu_map = "0-3:4-7";
  o.bind_to = BindTo::kNuma;
  EXPECT_MESSAGE(error_with(o, 2), "--cpu-map and --bind-to numa contradict");
}

TEST(BindingErrors, CpusAllowedOutsideTheNode) {
  auto o = on("grace.xml");
  o.cpus_allowed = "140-150";
  EXPECT_MESSAGE(error_with(o, 1), "names CPU 144, which this node does not have (its CPUs are 0-143)");
}

TEST(BindingErrors, EmptyCpuIntersectionOnThisMachine) {
  // Simulate srun's task/affinity: this process bound to its first CPU, then ask for another.
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  int first = -1, other = -1;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &saved)) (first < 0 ? first : other) = (first < 0 ? c : (other < 0 ? c : other));
  if (other < 0) GTEST_SKIP() << "needs two usable CPUs";
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  BindingOptions o;
  o.cpus_allowed = std::to_string(other);
  const auto m = error_with(o, 1);
  sched_setaffinity(0, sizeof saved, &saved);
  EXPECT_MESSAGE(m, "--cpus-allowed '" + std::to_string(other) +
                        "' has no CPU in common with the CPUs this task may use (" + std::to_string(first) + ",");
}

TEST(BindingErrors, UnreadableOrInvalidTopology) {
  EXPECT_MESSAGE(error_with(on("/nonexistent/dir/node.xml"), 1), "cannot be read");
  const std::string bad = ::testing::TempDir() + "hyrun-binding-garbage.xml";
  std::ofstream(bad) << "this is not xml\n";
  auto o = on("");
  o.topology = bad;
  EXPECT_MESSAGE(error_with(o, 1), "is not a valid hwloc XML topology");
  std::remove(bad.c_str());
  o.topology = "pack:two";
  EXPECT_MESSAGE(error_with(o, 1), "neither a file nor a valid hwloc synthetic description");
}

TEST(BindingErrors, UnknownNic) {
  auto o = on("dgx-h100.xml");
  o.nics = "mlx5_99";
  EXPECT_MESSAGE(error_with(o, 1), "names 'mlx5_99', which is not an OpenFabrics device of this node");
}

TEST(BindingErrors, ZeroRanks) { EXPECT_MESSAGE(error_with(on("dgx-h100.xml"), 0), "must be at least 1"); }

TEST(BindingThisMachine, InheritedCpuBindingLimitsThePlan) {
  // As under srun's task/affinity: the launcher itself is bound to one CPU.
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; ++c)
    if (CPU_ISSET(c, &saved)) first = c;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  std::vector<int> cpus;
  try {
    cpus = BindingPlan::compute(BindingOptions{}, 1, env_of()).ranks()[0].cpus;
  } catch (...) {
    sched_setaffinity(0, sizeof saved, &saved);
    throw;
  }
  sched_setaffinity(0, sizeof saved, &saved);
  EXPECT_EQ(cpus, std::vector<int>{first});
}
