// A rank's identity under srun and mpirun (launcher/outer_identity.*): what hyrun gives rank
// task*n+l equals what a native step of the same layout gives that task, for every rank of
// many layouts; hyrun's own values stay under HYRUN_OUTER_.
#include "hyrun/launcher/outer_identity.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "hyrun/common/error.hpp"

namespace hyrun {
namespace {

using Values = std::map<std::string, std::string, std::less<>>;

// Native srun's block distribution: `per_node` tasks on each of `nodes` nodes; task g's values.
Values native_slurm(int nodes, int per_node, int g) {
  const int node = g / per_node;
  std::string gtids;
  for (int i = 0; i < per_node; ++i) gtids += fmt::format("{}{}", i ? "," : "", node * per_node + i);
  const std::string counts = nodes > 1 ? fmt::format("{}(x{})", per_node, nodes) : std::to_string(per_node);
  const std::string total = std::to_string(nodes * per_node);
  return {{"SLURM_PROCID", std::to_string(g)},
          {"SLURM_LOCALID", std::to_string(g % per_node)},
          {"SLURM_NTASKS", total},
          {"SLURM_NPROCS", total},
          {"SLURM_STEP_NUM_TASKS", total},
          {"SLURM_TASKS_PER_NODE", counts},
          {"SLURM_STEP_TASKS_PER_NODE", counts},
          {"SLURM_GTIDS", gtids},
          {"SLURM_NODEID", std::to_string(node)},
          {"SLURM_STEP_ID", "7"}};
}

Values with_entries(Values values, const EnvironmentEntries& entries) {
  for (const auto& [name, value] : entries) values[name] = value;
  return values;
}

TEST(OuterIdentity, EveryRankUnderSrunIsWhatANativeStepGivesItsTask) {
  for (int nodes = 1; nodes <= 3; ++nodes)
    for (int tasks_per_node = 1; tasks_per_node <= 3; ++tasks_per_node)
      for (int n = 1; n <= 4; ++n) {
        if (nodes * tasks_per_node == 1) continue;  // hyrun alone: below
        const int world = nodes * tasks_per_node * n;
        for (int task = 0; task < nodes * tasks_per_node; ++task) {
          const Values outer = native_slurm(nodes, tasks_per_node, task);
          const OuterIdentity identity(OuterIdentity::Environment(outer.begin(), outer.end()), world, n);
          EXPECT_EQ(identity.pid_variable(), "SLURM_TASK_PID");
          for (int local = 0; local < n; ++local) {
            const int rank = task * n + local;
            const Values got = with_entries(outer, identity.for_rank(rank, local));
            Values want = native_slurm(nodes, tasks_per_node * n, rank);
            for (const auto& [name, value] : outer)
              if (name != "SLURM_NODEID" && name != "SLURM_STEP_ID") want["HYRUN_OUTER_" + name] = value;
            EXPECT_EQ(got, want) << nodes << " nodes x " << tasks_per_node << " tasks x " << n << " ranks: rank "
                                 << rank;
          }
        }
      }
}

TEST(OuterIdentity, ALaunchThatIsTheWholeJobIsAOneNodeStepOfItsRanks) {
  const Values outer = native_slurm(2, 2, 3);  // srun without PMIx: each hyrun its own job of 3
  const OuterIdentity identity(OuterIdentity::Environment(outer.begin(), outer.end()), 3, 3);
  Values want = native_slurm(1, 3, 2);
  want.erase("SLURM_NODEID");  // the node's, kept from hyrun's
  want.erase("SLURM_STEP_ID");
  for (const auto& [name, value] : outer)
    if (want.contains(name)) want["HYRUN_OUTER_" + name] = value;
  EXPECT_EQ(with_entries({}, identity.for_rank(2, 2)), want);
}

TEST(OuterIdentity, UnderMpirunEveryRankIsWhatANativeJobGivesItsProcess) {
  // mpirun -np 4 on 2 nodes (2 a node) against mpirun -np 2 on those nodes, hyrun -n 2 each.
  for (int task = 0; task < 2; ++task) {
    const Values outer{{"OMPI_COMM_WORLD_RANK", std::to_string(task)},
                       {"OMPI_COMM_WORLD_SIZE", "2"},
                       {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
                       {"OMPI_COMM_WORLD_NODE_RANK", "0"}};
    const OuterIdentity identity(OuterIdentity::Environment(outer.begin(), outer.end()), 4, 2);
    EXPECT_EQ(identity.pid_variable(), "");
    for (int local = 0; local < 2; ++local) {
      Values want{{"OMPI_COMM_WORLD_RANK", std::to_string(task * 2 + local)},
                  {"OMPI_COMM_WORLD_SIZE", "4"},
                  {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(local)},
                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                  {"OMPI_COMM_WORLD_NODE_RANK", std::to_string(local)}};
      for (const auto& [name, value] : outer) want["HYRUN_OUTER_" + name] = value;
      EXPECT_EQ(with_entries({}, identity.for_rank(task * 2 + local, local)), want) << "task " << task;
    }
  }
}

TEST(OuterIdentity, OutsideSrunAndMpirunNothingIsSet) {
  const OuterIdentity identity({{"PATH", "/bin"}}, 4, 4);
  EXPECT_TRUE(identity.for_rank(1, 1).empty());
  EXPECT_EQ(identity.pid_variable(), "");
}

TEST(OuterIdentity, SlurmCountListsScaleAndMalformedOnesAreNamed) {
  EXPECT_EQ(scale_slurm_counts("2(x3),1", 4), "8(x3),4");
  EXPECT_EQ(scale_slurm_counts("1", 2), "2");
  EXPECT_EQ(scale_slurm_counts("3,1,2(x2)", 3), "9,3,6(x2)");
  for (const char* bad : {"", "x", "2(x", "2(x3", "2(xy)", "-1", "1,,2", "1,"}) {
    try {
      scale_slurm_counts(bad, 2);
      ADD_FAILURE() << "'" << bad << "' was taken";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("'{}' is not a Slurm count list", bad)), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace hyrun
