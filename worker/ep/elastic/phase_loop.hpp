#pragma once
// What the coordinator (rank 0) and every member rank do alike in a phase: connect to the
// phase's peers, run the warm-up and timed dispatch + combine calls, survive failed calls by
// agreeing on who failed (each role agrees its own way: FailureAgreement on rank 0, a
// msg::Failed / msg::Resume exchange on the others), validate, and print the phase's lines.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "coordinator_messages.hpp"
#include "elastic_run.hpp"
#include "elastic_schedule.hpp"
#include "ep_calls.hpp"
#include "hyrun/ep/report/log_lines.hpp"

namespace hyrun::ep::elastic {

/// What this rank measured in one phase.
struct PhaseOutcome {
  std::optional<report::BandwidthStats> bandwidth;
  std::optional<report::SplitBandwidth> split;    ///< --kineto
  std::vector<int> detected;                      ///< failed ranks, ascending
  std::optional<double> detect_ms;                ///< of the first failure
  std::optional<std::string> validation_problem;  ///< --validate: the first failed check
};

/// Agrees with the other survivors on a failed call: given the ranks this rank saw fail,
/// after how long, at which iteration, returns the agreed newly failed ranks, the epoch and
/// the iteration to go on at.
using AgreeOnFailure = std::function<msg::Resume(const std::vector<int>& seen, double detect_ms, int iteration)>;

/// The host this rank runs on (SLURMD_NODENAME, else the host name), as the summary names it.
std::string node_name();
/// Writes one line to stdout at once (the log lines that CloudAI and the tests read).
void emit(const std::string& line);

class PhaseLoop {
 public:
  /// Creates this rank's EP Buffer for the run's largest shape, peers attached per phase (no
  /// collective: a restarted rank builds its own alone).
  PhaseLoop(World& world, const BenchOptions& options, const std::vector<ElasticPlan>& plans,
            const ElasticSchedule& schedule);
  ~PhaseLoop();
  PhaseLoop(const PhaseLoop&) = delete;
  PhaseLoop& operator=(const PhaseLoop&) = delete;

  Buffer& buffer() { return *buffer_; }

  /// Connects to the phase's peers that are new processes, detaches the ranks that leave
  /// now, and prints the phase's start and connection changes.
  void enter(const GlobalPhase& g, std::size_t gi, const std::vector<msg::Peer>& peers);

  /// Warm-up and timed calls of phase `gi` among its active ranks. `doomed`: the plan kills
  /// this rank: it announces a planned kill to hyrun and SIGKILLs itself at the first timed
  /// call. A failed call is agreed on with `agree` and the agreed iteration runs again
  /// without the failed ranks.
  PhaseOutcome run(const GlobalPhase& g, std::size_t gi, bool doomed, const AgreeOnFailure& agree);

  /// The phase's end lines: failures detected, bandwidth, the end.
  void report(const GlobalPhase& g, const PhaseOutcome& outcome);

  /// hyrun restarts this rank after its planned end when a later phase uses it; in a staged
  /// launch never: the new process is started on request or by a later launch.
  bool respawned_after(std::size_t gi) const;

 private:
  int handle_failure(const std::vector<int>& seen, std::chrono::steady_clock::time_point call_start, int iteration,
                     std::vector<char>& active, PhaseOutcome& outcome, const AgreeOnFailure& agree);
  void validate(std::size_t plan_index, int num_ranks, const std::vector<char>& active, PhaseOutcome& outcome);
  void print_connection_changes(const GlobalPhase& g, std::size_t gi);

  World& world_;
  const BenchOptions& options_;
  const std::vector<ElasticPlan>& plans_;
  const ElasticSchedule& schedule_;
  int me_;
  Shape shape_{};
  Format format_ = Format::kFP8;
  std::unique_ptr<Buffer> buffer_;  // the EP front: backend and transport
  std::unique_ptr<EpCalls> calls_;  // the call tensors in the backend's memory
  std::vector<int> attached_;       // incarnation of each peer whose region key is attached; -1 none
  bool ran_a_phase_ = false;        // BenchOptions::stop_in_first_phase: this process's first phase
};

}  // namespace hyrun::ep::elastic
