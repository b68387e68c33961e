#pragma once
// Rank 0 of the elastic benchmark: it runs the phases as a rank like the others (PhaseLoop)
// and drives them. A phase, as the coordinator runs it:
//   1. ranks that need a new process rejoin the World and register their EP region (in a
//      staged launch rank 0 first asks its hyrun to start the ones its launch starts);
//   2. msg::Phase to every rank that runs it, and to ranks that leave now (they get
//      msg::Free once every staying rank has detached them, then exit cleanly);
//   3. each active rank connects to new peers and answers msg::Ready (join time = phase to
//      ready); msg::Go;
//   4. warm-up and timed calls; the rank the plan kills announces a planned exit to hyrun
//      and SIGKILLs itself at the first timed call;
//   5. survivors see the failure, report msg::Failed; the FailureAgreement answers them all
//      with one msg::Resume;
//   6. msg::Result from every survivor; after a plan's last phase, the summary and report.
// At the end: msg::Done, every rank's msg::Closed, then msg::Free.
#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "elastic_run.hpp"
#include "elastic_schedule.hpp"
#include "join_server.hpp"
#include "phase_loop.hpp"

namespace hyrun::ep::elastic {

class Coordinator {
 public:
  Coordinator(World& world, const BenchOptions& options, const std::vector<ElasticPlan>& plans,
              const ElasticSchedule& schedule, PhaseLoop& loop);
  ~Coordinator();
  /// The whole run; returns the exit code (0). Throws Error for a failed --validate check
  /// or --validate-phase-failures, and for any rank that breaks the protocol.
  int run();

 private:
  /// What rank 0 knows of each rank's current process.
  struct RankRecord {
    int incarnation = 0;     // admissions so far
    std::string address;     // hex World address of a restarted process
    int world_node = 0;      // its World node (its launch's): peers' endpoints depend on it
    std::string descriptor;  // hex region descriptor
    bool alive = true;
    std::string node;  // from the rank's last result
    int local_rank = 0;
    std::string process;  // hex World::Rejoin::process: ranks of its host watch it
  };

  void open_join_server();
  bool starts_locally(int rank) const;
  bool ever_started(int rank) const;
  void release(int rank);
  void admit_new_processes(const GlobalPhase& g, std::size_t gi);
  void run_phase(const GlobalPhase& g, std::size_t gi, std::chrono::steady_clock::time_point phase_start,
                 std::vector<report::PhaseSample>& samples);
  void gather_samples(const GlobalPhase& g, const PhaseOutcome& outcome,
                      const std::vector<std::optional<double>>& join_ms, const std::vector<char>& failed,
                      std::vector<report::PhaseSample>& samples);
  void finish_plan(std::size_t plan_index, const std::vector<report::PhaseSample>& samples,
                   const std::vector<std::optional<double>>& durations);

  World& world_;
  const BenchOptions& options_;
  const std::vector<ElasticPlan>& plans_;
  const ElasticSchedule& schedule_;
  PhaseLoop& loop_;
  std::vector<RankRecord> ranks_;
  // Staged launches:
  std::optional<RankPool> pool_;
  std::unique_ptr<JoinServer> join_server_;
  std::vector<char> requested_;  // started on request
  std::vector<char> released_;   // given back to the pool
  std::vector<int> admissions_;
  std::map<int, World::Rejoin> early_;  // admitted by the World, not yet by a phase
  std::vector<std::string> invalid_;    // failed --validate checks
};

}  // namespace hyrun::ep::elastic
