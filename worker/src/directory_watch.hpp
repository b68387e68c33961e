#pragma once
// Waits for something to change in one directory: through inotify while the user has an
// instance left, else by looking at it every few milliseconds. The kernel allows a user
// fs.inotify.max_user_instances (128 on Debian) among all its processes, so a machine with
// more ranks of one user than that waiting at once would otherwise fail them.
#include <chrono>
#include <string>

#include "hyrun/common/unique_fd.hpp"

namespace hyrun {

class DirectoryWatch {
 public:
  enum class Change { kSomething, kDirectoryGone, kTimedOut };

  /// Watches `dir` for files closed after writing or renamed into it, and for its own removal.
  /// `context` starts every error message ("rank 3: HYRUN_ROOT_PENDING=/tmp/..."). Throws
  /// SystemError when neither inotify nor the directory itself can be had.
  DirectoryWatch(std::string dir, std::string context);

  /// Returns when something may have changed (callers look again), when the directory is gone,
  /// or at `deadline`. Polling returns kSomething after each interval.
  Change wait(std::chrono::steady_clock::time_point deadline);

  /// True when no inotify watch could be had and the directory is polled.
  bool polling() const { return !inotify_; }

  /// How often a polled directory is looked at.
  static constexpr std::chrono::milliseconds kPollInterval{10};

 private:
  Change wait_inotify(std::chrono::steady_clock::time_point deadline);
  Change wait_polling(std::chrono::steady_clock::time_point deadline);

  std::string dir_;
  std::string context_;
  UniqueFd inotify_;
};

}  // namespace hyrun
