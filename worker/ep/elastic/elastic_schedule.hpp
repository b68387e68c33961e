#pragma once
// The life of every rank's processes over a run of one or more plans, played one after
// another: which process runs which phase, who leaves or dies and whether hyrun must restart
// it afterwards. The plan model (hyrun/common/elastic_plan.hpp) says what each phase of one
// plan means; this adds what spans plans: a process that the plan does not use any more exits,
// and a rank active again later gets a new process.
#include <cstddef>
#include <vector>

#include "hyrun/common/elastic_plan.hpp"

namespace hyrun::ep::elastic {

struct GlobalPhase {
  std::size_t plan = 0;   ///< index of the plan
  std::size_t phase = 0;  ///< phase within that plan
  std::vector<char> active, killed;  ///< by rank
  std::vector<char> departs;         ///< rank leaves cleanly at the start of this phase
  std::vector<char> new_process;     ///< rank runs this phase in a process started for it
};

class ElasticSchedule {
 public:
  ElasticSchedule(const std::vector<ElasticPlan>& plans, int world_size);

  const std::vector<GlobalPhase>& phases() const { return phases_; }
  int world_size() const { return world_size_; }
  /// True when `rank` is active in some phase after global phase `g`.
  bool used_after(std::size_t g, int rank) const;
  /// True when `rank` is active in any phase at all.
  bool used(int rank) const { return used_after_start(rank); }

 private:
  bool used_after_start(int rank) const;
  std::vector<GlobalPhase> phases_;
  int world_size_;
};

}  // namespace hyrun::ep::elastic
