#pragma once
// How the survivors of a failed call agree on who failed, on the coordinator's side. Every
// survivor that sees a call fail reports the ranks it saw fail and the iteration it reached
// (msg::Failed); a survivor may see a failure one iteration early (its last flush to the
// dying rank fails after the data arrived). The coordinator takes the union of the reports,
// also counting as failed every rank whose death hyrun told it of (it will report nothing),
// and answers every survivor with one decision (msg::Resume): the newly failed ranks, a new
// epoch and the latest iteration any of them reached, so that every survivor makes the same
// calls from there on. Pure logic; the coordinator feeds it what it receives.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "coordinator_messages.hpp"

namespace hyrun::ep::elastic {

/// The epoch of a phase's calls after `failure_round` agreed failures: above every epoch of
/// earlier phases and rounds (a phase runs fewer than 2^24 calls and 256 rounds).
uint64_t phase_epoch(std::size_t global_phase, int failure_round);

class FailureAgreement {
 public:
  /// `active`: flags by rank of the phase's ranks, the coordinator (rank 0) among them.
  FailureAgreement(std::vector<char> active, std::size_t global_phase);

  /// A round begins with the coordinator's own view: the ranks it saw fail, at `iteration`.
  void begin_round(const std::vector<int>& seen, int iteration);

  /// The next survivor whose report the round waits for, ascending, or nullopt when every
  /// report is in. Ranks already counted failed are skipped, and so is every rank for which
  /// `known_dead(rank)` holds: it is counted failed.
  std::optional<int> next_reporter(const std::function<bool(int)>& known_dead);

  /// Adds the report of `from`, the rank next_reporter() named. Throws Error naming `from`
  /// when the report names a rank outside the world or the coordinator (which is alive: it
  /// reads the report).
  void add_report(int from, const msg::Failed& report);

  struct Decision {
    msg::Resume resume;          ///< what every survivor is told
    std::vector<int> survivors;  ///< the phase's ranks other than 0 that are not failed
  };
  /// Ends the round (every report in): the newly failed ranks, the round's epoch, the latest
  /// iteration reached.
  Decision decide();

  /// Flags by rank of every rank failed in the phase so far.
  const std::vector<char>& failed() const { return failed_; }

 private:
  void count_failed(int from, const std::vector<int>& ranks);

  std::vector<char> active_;
  std::size_t global_phase_;
  std::vector<char> failed_;        // before this round
  std::vector<char> round_failed_;  // failed_ and what this round adds
  int rounds_ = 0;
  int iteration_ = 0;
  std::size_t next_ = 1;
};

}  // namespace hyrun::ep::elastic
