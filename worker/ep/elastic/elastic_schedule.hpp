#pragma once
// The life of every rank's processes over a run of one or more plans, played one after
// another: which process runs which phase, who leaves or dies and whether hyrun must restart
// it afterwards. The plan model (worker/ep/plan) derives what each phase of one plan
// means (active, killed, joining, leaving); this takes those sets as they are and adds only
// what spans plans and processes: the first phase of a later plan follows the previous plan's
// last one, and a joining rank whose earlier process ended (or that has none yet) needs a new one.
#include <cstddef>
#include <vector>

#include "hyrun/ep/plan/elastic_plan.hpp"

namespace hyrun::ep::elastic {

/// One phase of the run, its sets as flags by rank.
struct GlobalPhase {
  std::size_t plan = 0;              ///< index of the plan
  std::size_t phase = 0;             ///< phase within that plan
  std::vector<char> active, killed;  ///< the plan phase's sets
  std::vector<char> departs;         ///< leaves cleanly now (the plan's leaving, across plans too)
  std::vector<char> new_process;     ///< runs this phase in a process started for it
};

class ElasticSchedule {
 public:
  /// `started_at_launch[r]`: rank r's first process starts with the job (empty: every rank);
  /// the first phase of any other rank starts a new process for it.
  ElasticSchedule(const std::vector<ElasticPlan>& plans, int world_size, std::vector<char> started_at_launch = {});

  const std::vector<GlobalPhase>& phases() const { return phases_; }
  int world_size() const { return world_size_; }
  /// True when `rank` is active in some phase after global phase `g`.
  bool used_after(std::size_t g, int rank) const;
  /// True when `rank` is active in any phase at all.
  bool used(int rank) const;
  bool started_at_launch(int rank) const { return started_at_launch_[rank]; }

 private:
  std::vector<GlobalPhase> phases_;
  int world_size_;
  std::vector<char> started_at_launch_;
};

/// The ranks whose flag is set, ascending.
std::vector<int> ranks_where(const std::vector<char>& flags);

/// The ranks that start with a staged launch whose first launch runs ranks
/// 0..launch_ranks-1: those of them active in the first phase (ascending, rank 0 first).
std::vector<int> launch_start_ranks(const ElasticPlan& first_plan, int launch_ranks);

}  // namespace hyrun::ep::elastic
