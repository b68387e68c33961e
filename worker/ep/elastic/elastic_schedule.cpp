#include "elastic_schedule.hpp"

#include <algorithm>

namespace hyrun::ep::elastic {

ElasticSchedule::ElasticSchedule(const std::vector<ElasticPlan>& plans, int world_size, std::vector<char> started_at_launch)
    : world_size_(world_size), started_at_launch_(std::move(started_at_launch)) {
  const auto n = static_cast<std::size_t>(world_size);
  if (started_at_launch_.empty()) started_at_launch_.assign(n, 1);
  std::vector<char> alive = started_at_launch_, was_active(n, 0);
  for (std::size_t p = 0; p < plans.size(); ++p)
    for (std::size_t ph = 0; ph < plans[p].num_phases(); ++ph) {
      GlobalPhase g{p, ph, std::vector<char>(n, 0), std::vector<char>(n, 0), std::vector<char>(n, 0),
                    std::vector<char>(n, 0)};
      const auto& phase = plans[p].phase(ph);
      for (int r : phase.active) g.active[r] = 1;
      for (int r : phase.killed) g.killed[r] = 1;
      for (std::size_t r = 0; r < n; ++r) {
        if (was_active[r] && !g.active[r]) {  // omitted now: leaves cleanly
          g.departs[r] = 1;
          alive[r] = 0;
        }
        if (g.active[r] && !alive[r]) {
          g.new_process[r] = 1;
          alive[r] = 1;
        }
        if (g.killed[r]) alive[r] = 0;
        was_active[r] = g.active[r] && !g.killed[r];
      }
      phases_.push_back(std::move(g));
    }
}

bool ElasticSchedule::used_after(std::size_t g, int rank) const {
  for (std::size_t i = g + 1; i < phases_.size(); ++i)
    if (phases_[i].active[rank]) return true;
  return false;
}

bool ElasticSchedule::used_after_start(int rank) const {
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
