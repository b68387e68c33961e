#include "hyrun/launcher/early_start.hpp"

#include <spdlog/spdlog.h>

#include "hyrun/common/error.hpp"

namespace hyrun {

bool EarlyStart::start(RankSupervisor& supervisor) {
  if (ranks_.empty() || state_ != State::kNone) return false;
  try {
    pending_.emplace(PendingDirectory::create());
  } catch (const SystemError& e) {
    spdlog::debug("the ranks start once their root is known: {}", e.what());
    return false;
  }
  state_ = State::kStarted;
  node_.defer_root(pending_->path());
  for (const int local : ranks_) {
    if (supervisor.stopping()) break;
    supervisor.start(node_.rank(local, false));
  }
  return true;
}

bool EarlyStart::complete() {
  if (state_ != State::kStarted) return false;
  node_.defer_root("");
  state_ = State::kCompleted;
  for (const int local : ranks_) pending_->put(node_.rank(local, false).global_rank, node_.pending_environment(local));
  return true;
}

void EarlyStart::finish(RankSupervisor& supervisor, const std::function<void()>& between) {
  if (state_ != State::kNone) {
    complete();
    return;
  }
  state_ = State::kCompleted;  // started whole: nothing to complete, nothing to start again
  for (const int local : ranks_) {
    if (supervisor.stopping()) break;
    supervisor.start(node_.rank(local, false));
    if (between) between();
  }
}

}  // namespace hyrun
