// The plan model: the reference plans' derived sets element by element, and every validation message.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "hyrun/common/error.hpp"
#include "hyrun/ep/plan/elastic_plan.hpp"

namespace hyrun {
namespace {

using V = std::vector<int>;

struct Expected {
  V active, killed, joining, leaving, survivors, new_processes;
};

void expect_phase(const ElasticPlan& plan, std::size_t p, const Expected& e) {
  SCOPED_TRACE("phase " + std::to_string(p));
  const PlanPhase& ph = plan.phase(p);
  EXPECT_EQ(ph.active, e.active);
  EXPECT_EQ(ph.killed, e.killed);
  EXPECT_EQ(ph.joining, e.joining);
  EXPECT_EQ(ph.leaving, e.leaving);
  EXPECT_EQ(ph.survivors, e.survivors);
  EXPECT_EQ(ph.new_processes, e.new_processes);
}

TEST(ElasticPlan, NoExpansion) {
  const auto plan = ElasticPlan::parse("[[0,1,2,3]]", 4);
  ASSERT_EQ(plan.num_phases(), 1u);
  expect_phase(plan, 0, {{0, 1, 2, 3}, {}, {0, 1, 2, 3}, {}, {0, 1, 2, 3}, {}});
  EXPECT_EQ(plan.max_rank(), 3);
  EXPECT_EQ(plan.num_experts(2), 8);
  EXPECT_EQ(plan.unused_ranks(), V{});
  EXPECT_EQ(plan.to_json(), "[[0,1,2,3]]");
}

TEST(ElasticPlan, SingleExpansion) {
  const auto plan = ElasticPlan::parse("[[0,1,2,3],[0,1,2,3,4,5,6,7]]", 8);
  ASSERT_EQ(plan.num_phases(), 2u);
  expect_phase(plan, 0, {{0, 1, 2, 3}, {}, {0, 1, 2, 3}, {}, {0, 1, 2, 3}, {}});
  expect_phase(plan, 1, {{0, 1, 2, 3, 4, 5, 6, 7}, {}, {4, 5, 6, 7}, {}, {0, 1, 2, 3, 4, 5, 6, 7}, {}});
  EXPECT_EQ(plan.num_experts(2), 16);
  EXPECT_EQ(plan.role(0, 5), PhaseRole::kIdle);
  EXPECT_EQ(plan.role(1, 5), PhaseRole::kJoined);
  EXPECT_EQ(plan.role(1, 1), PhaseRole::kActive);
  EXPECT_FALSE(plan.needs_new_process(1, 5));
}

TEST(ElasticPlan, DoubleExpansion) {
  const auto plan = ElasticPlan::parse("[[0,1,2,3],[0,1,2,3,4,5],[0,1,2,3,4,5,6,7]]", 8);
  ASSERT_EQ(plan.num_phases(), 3u);
  expect_phase(plan, 0, {{0, 1, 2, 3}, {}, {0, 1, 2, 3}, {}, {0, 1, 2, 3}, {}});
  expect_phase(plan, 1, {{0, 1, 2, 3, 4, 5}, {}, {4, 5}, {}, {0, 1, 2, 3, 4, 5}, {}});
  expect_phase(plan, 2, {{0, 1, 2, 3, 4, 5, 6, 7}, {}, {6, 7}, {}, {0, 1, 2, 3, 4, 5, 6, 7}, {}});
}

TEST(ElasticPlan, ExpansionContraction) {
  const auto plan = ElasticPlan::parse("[[0,1,2,3],[0,1,2,3,4,5,6,7],[0,1,2,3,4,-6,7],[0,1,2,3,4,5,6,7]]", 8);
  ASSERT_EQ(plan.num_phases(), 4u);
  expect_phase(plan, 0, {{0, 1, 2, 3}, {}, {0, 1, 2, 3}, {}, {0, 1, 2, 3}, {}});
  expect_phase(plan, 1, {{0, 1, 2, 3, 4, 5, 6, 7}, {}, {4, 5, 6, 7}, {}, {0, 1, 2, 3, 4, 5, 6, 7}, {}});
  // 5 is omitted: leaves cleanly; 6 is killed mid-phase but still runs dispatch/combine until then.
  expect_phase(plan, 2, {{0, 1, 2, 3, 4, 6, 7}, {6}, {}, {5}, {0, 1, 2, 3, 4, 7}, {}});
  // 5 and 6 come back as new processes.
  expect_phase(plan, 3, {{0, 1, 2, 3, 4, 5, 6, 7}, {}, {5, 6}, {}, {0, 1, 2, 3, 4, 5, 6, 7}, {5, 6}});
  EXPECT_EQ(plan.role(2, 6), PhaseRole::kKilled);
  EXPECT_EQ(plan.role(2, 5), PhaseRole::kLeft);
  EXPECT_EQ(plan.role(3, 5), PhaseRole::kJoined);
  EXPECT_TRUE(plan.needs_new_process(3, 6));
  EXPECT_FALSE(plan.needs_new_process(3, 4));
  EXPECT_EQ(plan.incarnation(2, 6), 0);
  EXPECT_EQ(plan.incarnation(3, 6), 1);
  EXPECT_EQ(plan.incarnation(2, 5), -1);
  EXPECT_EQ(plan.to_json(), "[[0,1,2,3],[0,1,2,3,4,5,6,7],[0,1,2,3,4,-6,7],[0,1,2,3,4,5,6,7]]");
}

TEST(ElasticPlan, ExpansionFaultContraction) {
  const auto plan = ElasticPlan::parse("[[0,1],[0,1,2,3],[0,1,-2,3],[0,3]]", 4);
  ASSERT_EQ(plan.num_phases(), 4u);
  expect_phase(plan, 0, {{0, 1}, {}, {0, 1}, {}, {0, 1}, {}});
  expect_phase(plan, 1, {{0, 1, 2, 3}, {}, {2, 3}, {}, {0, 1, 2, 3}, {}});
  expect_phase(plan, 2, {{0, 1, 2, 3}, {2}, {}, {}, {0, 1, 3}, {}});
  // 1 leaves cleanly; 2 was killed in phase 2, so it is not "leaving" here.
  expect_phase(plan, 3, {{0, 3}, {}, {}, {1}, {0, 3}, {}});
  EXPECT_EQ(plan.role(3, 2), PhaseRole::kIdle);
  EXPECT_EQ(plan.role(3, 1), PhaseRole::kLeft);
  EXPECT_EQ(plan.num_experts(2), 8);
}

TEST(ElasticPlan, UnusedWorldRanksAreListed) {
  const auto plan = ElasticPlan::parse("[[0,1],[0,1,2,3]]", 8);
  EXPECT_EQ(plan.unused_ranks(), (V{4, 5, 6, 7}));
  EXPECT_EQ(ElasticPlan::parse("[[0,2]]", 0).unused_ranks(), V{});
}

TEST(ElasticPlan, KilledRankMayRejoinAndBeKilledAgain) {
  const auto plan = ElasticPlan::parse("[[0,1],[0,-1],[0,1],[0,-1],[0,1]]", 2);
  expect_phase(plan, 2, {{0, 1}, {}, {1}, {}, {0, 1}, {1}});
  expect_phase(plan, 3, {{0, 1}, {1}, {}, {}, {0}, {}});
  EXPECT_EQ(plan.incarnation(4, 1), 2);
}

std::string error_of(const std::string& text, int world = 8) {
  try {
    ElasticPlan::parse(text, world, "test plan");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

void expect_error(const std::string& text, const std::string& part, int world = 8) {
  const std::string msg = error_of(text, world);
  EXPECT_NE(msg.find(part), std::string::npos)
      << "plan " << text << "\n  message: " << msg << "\n  expected to contain: " << part;
  EXPECT_EQ(msg.rfind("test plan: ", 0), 0u) << msg;
}

TEST(ElasticPlanErrors, InvalidJson) { expect_error("[[0,1", "plan must be valid JSON: "); }

TEST(ElasticPlanErrors, NotAListOfPhases) {
  expect_error("[]", "plan must decode to a non-empty list of phases");
  expect_error("{\"a\":1}", "plan must decode to a non-empty list of phases, got {\"a\":1}");
  expect_error("3", "plan must decode to a non-empty list of phases");
}

TEST(ElasticPlanErrors, PhaseNotAList) {
  expect_error("[[0,1],[]]", "each plan phase must be a non-empty list of ranks: plan phase 1 (0-based) is []");
  expect_error("[[0,1],5]", "plan phase 1 (0-based) is 5");
}

TEST(ElasticPlanErrors, RankNotAnInteger) {
  expect_error("[[0,1],[0,1,2,\"x\"]]",
               "plan phase 1 (0-based), position 3: \"x\" is not an integer rank; each plan rank must be an integer");
  expect_error("[[0,1.5]]", "plan phase 0 (0-based), position 1: 1.5 is not an integer rank");
  expect_error("[[0,true]]", "position 1: true is not an integer rank");
  expect_error("[[0,99999999999]]", "position 1: 99999999999 is too large for a rank");
}

TEST(ElasticPlanErrors, RankOutsideWorld) {
  expect_error("[[0,1],[0,1,9]]",
               "rank 9 in plan phase 1 (0-based) is outside the world of 8 ranks started by hyrun (hyrun -n 8); "
               "start at least 10 ranks or remove it");
}

TEST(ElasticPlanErrors, RankZeroMissing) {
  expect_error("[[0,1],[1,2]]",
               "plan phase 1 (0-based) is [1,2] and does not list rank 0; rank 0 hosts the coordinator");
}

TEST(ElasticPlanErrors, RankZeroCannotBeKilled) {
  expect_error(
      "[[0,1],[-0,1]]",
      "plan phase 1 (0-based), position 0: -0 asks to kill rank 0, but rank 0 hosts the coordinator and cannot be killed");
  // "-0" inside a string or as a prefix of another number is not a kill of rank 0.
  EXPECT_EQ(error_of("[[0,-0.5]]").find("-0 asks"), std::string::npos);
}

TEST(ElasticPlanErrors, DuplicateRank) {
  expect_error("[[0,1,2,1]]", "plan phase 0 (0-based) lists rank 1 twice (as 1 at position 1 and 1 at position 3)");
  expect_error("[[0,1,2],[0,2,-2]]",
               "plan phase 1 (0-based) lists rank 2 twice (as 2 at position 1 and -2 at position 2)");
}

TEST(ElasticPlanErrors, KillOfRankNotRunning) {
  expect_error("[[0,-1]]",
               "plan phase 0, position 1: -1 kills rank 1 in the first phase, but no rank is running before it");
  expect_error("[[0,1],[0,1,-3]]",
               "plan phase 1 (0-based), position 2: -3 kills rank 3, but rank 3 is not running in phase 0");
  expect_error("[[0,1],[0,-1],[0,-1]]",
               "plan phase 2 (0-based), position 1: -1 kills rank 1, but rank 1 is not running in phase 1");
}

TEST(ElasticPlanErrors, PhaseIndexOutOfRange) {
  const auto plan = ElasticPlan::parse("[[0]]", 1);
  EXPECT_THROW(plan.phase(1), UsageError);
}

TEST(ElasticPlanOption, ReadsAFileOrJsonText) {
  const auto dir = std::filesystem::temp_directory_path() / ("hyrun-plan-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto file = dir / "plan.json";
  std::ofstream(file) << "[[0,1],[0,1,2,3]]\n";
  EXPECT_EQ(ElasticPlan::from_option(file.string(), 4).num_phases(), 2u);
  EXPECT_EQ(ElasticPlan::from_option(file.string(), 4).source(), "--plan file '" + file.string() + "'");
  EXPECT_EQ(ElasticPlan::from_option("[[0,1]]", 4).source(), "--plan JSON text");

  std::ofstream(file) << "[[0,1],[0,";
  try {
    ElasticPlan::from_option(file.string(), 4);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--plan file '" + file.string() + "': plan must be valid JSON"),
              std::string::npos)
        << e.what();
  }
  try {
    ElasticPlan::from_option("no-such-plan.json", 4);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--plan 'no-such-plan.json' is neither an existing file nor JSON text"),
              std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(ElasticPlanExamples, ShippedPlansParse) {
  const std::filesystem::path dir = HYRUN_EXAMPLE_PLANS_DIR;
  const std::vector<std::pair<std::string, std::size_t>> plans = {{"no_expansion", 1},
                                                                  {"single_expansion", 2},
                                                                  {"double_expansion", 3},
                                                                  {"expansion_contraction", 4},
                                                                  {"expansion_fault_contraction", 4}};
  for (const auto& [name, phases] : plans) {
    SCOPED_TRACE(name);
    EXPECT_EQ(ElasticPlan::from_option((dir / (name + ".json")).string(), 8).num_phases(), phases);
  }
}

}  // namespace
}  // namespace hyrun
