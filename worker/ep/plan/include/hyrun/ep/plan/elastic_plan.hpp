#pragma once
// The elastic expert-parallel plan: which ranks run in which phase (CloudAI's NixlEP convention).
//
// A plan is a JSON list of phases; each phase is a non-empty list of integer ranks.
//   positive r  rank r is active in the phase (a rank new relative to the previous phase joins);
//   negative -r rank r is killed during the phase's dispatch/combine (a real failure);
//   omitted     a rank active in the previous phase and absent now leaves cleanly at this phase.
// A rank that is active again after being killed or after leaving is a NEW process that joins again.
// Rank 0 hosts the coordinator: it is active in every phase and cannot be killed.
//
// Parsing validates everything up front, so a bad plan fails before any process starts; every
// message names the source, the phase and position, what is wrong and what would be right.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace hyrun {

/// What one rank does in one phase, as the summary shows it.
enum class PhaseRole {
  kIdle,    ///< not part of this phase (never started yet, or gone earlier)
  kActive,  ///< active and was already active in the previous phase
  kJoined,  ///< active now, not a survivor of the previous phase (phase 0: every rank)
  kKilled,  ///< active and killed during this phase's dispatch/combine
  kLeft,    ///< survivor of the previous phase that is absent now (clean exit)
};

/// "idle", "active", "joined", "killed", "left".
std::string_view to_string(PhaseRole role);

/// One phase with the sets derived from the plan. All rank lists are sorted ascending.
struct PlanPhase {
  std::vector<int> entries;        ///< the phase as written (negative = killed)
  std::vector<int> active;         ///< ranks that run dispatch/combine, killed ones included
  std::vector<int> killed;         ///< ranks killed during this phase's dispatch/combine
  std::vector<int> joining;        ///< active, and not a survivor of the previous phase
  std::vector<int> leaving;        ///< survivors of the previous phase that are absent now
  std::vector<int> survivors;      ///< active and not killed
  std::vector<int> new_processes;  ///< joining ranks that ran before (killed or left): need a new process
};

class ElasticPlan {
 public:
  /// Parses plan JSON text. `source` names the input in messages (e.g. "--plan text").
  /// `world_size` is the number of ranks hyrun started (every plan rank must be below it);
  /// 0 skips that check (unused_ranks() is then empty). Throws UsageError.
  static ElasticPlan parse(std::string_view json, int world_size, std::string_view source = "plan");

  /// Parses a --plan value: if it names an existing file the file is read, otherwise the value
  /// itself is parsed as JSON; messages say which. Throws UsageError.
  static ElasticPlan from_option(const std::string& value, int world_size);

  const std::vector<PlanPhase>& phases() const noexcept { return phases_; }
  std::size_t num_phases() const noexcept { return phases_.size(); }
  const PlanPhase& phase(std::size_t p) const;  ///< throws UsageError when p is out of range
  const std::string& source() const noexcept { return source_; }
  int world_size() const noexcept { return world_size_; }

  /// Largest rank in any phase (killed ones included).
  int max_rank() const noexcept { return max_rank_; }
  /// experts_per_rank * (max_rank() + 1): experts of inactive ranks stay in the routing.
  int num_experts(int experts_per_rank) const noexcept { return experts_per_rank * (max_rank_ + 1); }
  /// World ranks that no phase uses, ascending: they exit 0 with a note.
  std::vector<int> unused_ranks() const;

  PhaseRole role(std::size_t p, int rank) const;
  bool is_active(std::size_t p, int rank) const;
  /// True when `rank` must be (re)started for phase p: it was killed or left before and is active again.
  bool needs_new_process(std::size_t p, int rank) const;
  /// Which process of `rank` runs phase p: 0 for its first, +1 for each restart; -1 when not active.
  int incarnation(std::size_t p, int rank) const;

  /// The plan as run, compact JSON ("[[0,1],[0,1,-2,3]]").
  std::string to_json() const;

 private:
  std::vector<PlanPhase> phases_;
  std::string source_;
  int world_size_ = 0;
  int max_rank_ = 0;
};

}  // namespace hyrun
