#pragma once
// A rank other than 0 in the elastic benchmark: registers its process with the coordinator,
// then runs the phases it is told to (msg::Phase), reports failures and results, and leaves
// when the plan or the run's end says so.
#include "elastic_schedule.hpp"
#include "phase_loop.hpp"

namespace hyrun::ep::elastic {

class Member {
 public:
  Member(World& world, const ElasticSchedule& schedule, PhaseLoop& loop);
  /// Until the run's end or this process's planned end; returns the exit code (0).
  int run();

 private:
  /// Returns true when this process leaves the job in this phase.
  bool run_phase(const msg::Phase& message);
  /// Idle ranks wait for the coordinator for as long as it lives.
  template <class... Ms>
  auto expect_patiently();

  World& world_;
  const ElasticSchedule& schedule_;
  PhaseLoop& loop_;
  int me_;
};

}  // namespace hyrun::ep::elastic
