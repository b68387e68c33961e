#pragma once
// Ranks started before what they need of the launch is known: with the worker library's
// bootstrap a rank needs rank 0's address (and, on another node, the job's token) only when
// its World starts, so a launch starts it at once with HYRUN_ROOT_PENDING, and it loads and
// sets up UCX while rank 0 publishes and the nodes exchange; complete() then hands it the
// rest through a pending directory (docs/architecture.md, "Ranks started before the
// exchange"). hyrun's launch (launch_sequence.cpp) and ep-elastic's staged launch
// (worker/ep/launcher/) both start their ranks so. Without a place for the directory (a full
// $TMPDIR) nothing starts early, and finish() starts the ranks as before, once it is known.
#include <functional>
#include <optional>
#include <vector>

#include "hyrun/launcher/node_launch.hpp"
#include "hyrun/launcher/pending_directory.hpp"
#include "hyrun/launcher/rank_supervisor.hpp"

namespace hyrun {

class EarlyStart {
 public:
  /// `node`'s ranks `local_ranks` (its local rank numbers) are the ones started early or late;
  /// `node` must outlive this object.
  EarlyStart(NodeLaunch& node, std::vector<int> local_ranks) : node_(node), ranks_(std::move(local_ranks)) {}

  /// Starts the ranks now, their root address deferred. Returns false, starting nothing, when
  /// no pending directory can be made. Throws what RankSupervisor::start throws.
  bool start(RankSupervisor& supervisor);
  /// The node now has what the ranks lack (its root address, its job token): the ranks that
  /// started early get it. Returns false, doing nothing, when none did or they have it
  /// already. Throws SystemError when a rank's file cannot be written.
  bool complete();
  /// complete() when the ranks started early; otherwise starts them now (stopping when the
  /// job is stopping), calling `between` after each (a node link still heard meanwhile).
  /// Either way started() is true after it, and a second call starts nothing.
  void finish(RankSupervisor& supervisor, const std::function<void()>& between = {});
  bool started() const { return state_ != State::kNone; }
  /// Removes the pending directory now (an abort ends the process without destructors).
  void remove() noexcept {
    if (pending_) pending_->remove();
  }

 private:
  enum class State { kNone, kStarted, kCompleted };
  NodeLaunch& node_;
  std::vector<int> ranks_;
  State state_ = State::kNone;
  std::optional<PendingDirectory> pending_;  // where the ranks take the rest of their environment
};

}  // namespace hyrun
