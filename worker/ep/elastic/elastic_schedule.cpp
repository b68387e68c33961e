#include "elastic_schedule.hpp"

#include <algorithm>
#include <iterator>

namespace hyrun::ep::elastic {

namespace {

std::vector<char> mask_of(const std::vector<int>& ranks, std::size_t n) {
  std::vector<char> mask(n, 0);
  for (int r : ranks) mask[static_cast<std::size_t>(r)] = 1;
  return mask;
}

/// Ranks of sorted `a` that are not in sorted `b`.
std::vector<int> minus(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

}  // namespace

ElasticSchedule::ElasticSchedule(const std::vector<ElasticPlan>& plans, int world_size,
                                 std::vector<char> started_at_launch)
    : world_size_(world_size), started_at_launch_(std::move(started_at_launch)) {
  const auto n = static_cast<std::size_t>(world_size);
  if (started_at_launch_.empty()) started_at_launch_.assign(n, 1);
  std::vector<char> ran(n, 0);  // a process of the rank has run a phase: its next one is new
  const PlanPhase* previous = nullptr;
  for (std::size_t p = 0; p < plans.size(); ++p)
    for (std::size_t ph = 0; ph < plans[p].num_phases(); ++ph) {
      const PlanPhase& phase = plans[p].phase(ph);
      // Who joins and leaves is the plan's; only the first phase of a later plan follows
      // the previous plan's last phase, which its own plan cannot know.
      const bool after_plan = ph == 0 && previous != nullptr;
      const auto joining = after_plan ? minus(phase.active, previous->survivors) : phase.joining;
      const auto leaving = after_plan ? minus(previous->survivors, phase.active) : phase.leaving;
      GlobalPhase g{
          p, ph, mask_of(phase.active, n), mask_of(phase.killed, n), mask_of(leaving, n), std::vector<char>(n, 0)};
      for (int r : joining)
        if (ran[r] || !started_at_launch_[r]) g.new_process[r] = 1;
      for (int r : phase.active) ran[r] = 1;
      previous = &phase;
      phases_.push_back(std::move(g));
    }
}

bool ElasticSchedule::used_after(std::size_t g, int rank) const {
  for (std::size_t i = g + 1; i < phases_.size(); ++i)
    if (phases_[i].active[rank]) return true;
  return false;
}

bool ElasticSchedule::used(int rank) const {
  for (const auto& g : phases_)
    if (g.active[rank]) return true;
  return false;
}

std::vector<int> ranks_where(const std::vector<char>& flags) {
  std::vector<int> out;
  for (std::size_t r = 0; r < flags.size(); ++r)
    if (flags[r]) out.push_back(static_cast<int>(r));
  return out;
}

std::vector<int> launch_start_ranks(const ElasticPlan& first_plan, int launch_ranks) {
  std::vector<int> out;
  for (int r : first_plan.phase(0).active)
    if (r < launch_ranks) out.push_back(r);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace hyrun::ep::elastic
