#pragma once
// --output-filename DIR (mpirun's): every rank's stdout and stderr also go to
// DIR/rank.<global rank>/stdout and .../stderr, as the rank wrote them (no label, no time).
// A restarted rank appends to the files of its rank. No path component below DIR is
// followed if it is a symlink (a shared DIR must not let others redirect the output), and
// a file there that is not a regular file (a planted FIFO) is refused without waiting on it.
#include <map>
#include <string>
#include <utility>

#include "hyrun/process/unique_fd.hpp"

namespace hyrun {

class RankOutputFiles {
 public:
  /// `dir` empty: no files. The directory is created when the first rank opens its files.
  explicit RankOutputFiles(std::string dir) : dir_(std::move(dir)) {}

  bool enabled() const { return !dir_.empty(); }
  /// Opens (creating and truncating on first use) the files of `rank`. Throws UsageError
  /// naming --output-filename and the path that cannot be created.
  void open(int rank);
  /// The fd of `rank`'s stream (1 stdout, 2 stderr), or -1 when it has none.
  int fd(int rank, int destination) const;

 private:
  /// Opens `name` in `dir_fd` (DIR/`relative`) for writing: created, truncated, a regular
  /// file. Throws UsageError naming the path otherwise.
  UniqueFd open_regular(int dir_fd, const std::string& relative, const char* name) const;

  std::string dir_;
  std::map<std::pair<int, int>, UniqueFd> files_;
};

}  // namespace hyrun
