#include "elastic_run.hpp"

#include <fmt/format.h>

#include "coordinator.hpp"
#include "elastic_schedule.hpp"
#include "member.hpp"
#include "phase_loop.hpp"

namespace hyrun::ep::elastic {
namespace {

/// started_at_launch of the schedule: every rank, or in a staged launch the ranks of rank
/// 0's launch that the first phase uses (the others start when their phase begins).
std::vector<char> started_at_launch(const BenchOptions& options, const std::vector<ElasticPlan>& plans,
                                    int world_size) {
  if (!options.staged.staged()) return {};
  std::vector<char> started(static_cast<std::size_t>(world_size), 0);
  for (int r : launch_start_ranks(plans.front(), options.staged.launch_ranks)) started[r] = 1;
  return started;
}

}  // namespace

int run_elastic_bench(World& world, const BenchOptions& options) {
  std::vector<ElasticPlan> plans;
  const auto& p = options.parameters;
  for (const auto& text : options.plans) {
    plans.push_back(ElasticPlan::from_option(text, world.size()));
    // Each token picks --num-topk distinct experts among the plan's.
    const int experts = plans.back().num_experts(p.num_experts_per_rank);
    if (p.num_topk > experts)
      throw UsageError(fmt::format(
          "--num-topk {} is larger than the {} experts of plan {} ({} per rank x {} ranks): "
          "give --num-topk {} or less, or more --num-experts-per-rank",
          p.num_topk, experts, plans.back().source(), p.num_experts_per_rank, plans.back().max_rank() + 1, experts));
  }
  const ElasticSchedule schedule(plans, world.size(), started_at_launch(options, plans, world.size()));
  if (!schedule.used(world.rank())) {
    emit(report::unused_rank_line(world.rank(), world.local_rank()));
    return 0;
  }
  PhaseLoop loop(world, options, plans, schedule);
  if (world.rank() == 0) return Coordinator(world, options, plans, schedule, loop).run();
  return Member(world, schedule, loop).run();
}

}  // namespace hyrun::ep::elastic
