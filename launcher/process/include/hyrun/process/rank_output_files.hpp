#pragma once
// --output-filename DIR (mpirun's): every rank's stdout and stderr also go to
// DIR/rank.<global rank>/stdout and .../stderr, as the rank wrote them (no label, no time).
// A restarted rank appends to the files of its rank. No path component below DIR is
// followed if it is a symlink (a shared DIR must not let others redirect the output), and
// a file there that is not a regular file (a planted FIFO) is refused without waiting on it.
// A write that fails (a full disk, a quota, `ulimit -f`) is said once per file, with the
// error; that file gets nothing more, and lost() names it so the job's verdict can say so.
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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
  /// Appends `text` to `rank`'s file of `destination` (1 stdout, 2 stderr), if it has one. The first failed
  /// write of a file warns once (the path and the error) and ends that file's output.
  void write(int rank, int destination, std::string_view text);
  /// "PATH (error)" for every file that lost output, in the order they failed.
  const std::vector<std::string>& lost() const { return lost_; }

 private:
  /// Opens `name` in `dir_fd` (DIR/`relative`) for writing: created, truncated, a regular
  /// file. Throws UsageError naming the path otherwise.
  UniqueFd open_regular(int dir_fd, const std::string& relative, const char* name) const;

  std::string dir_;
  std::map<std::pair<int, int>, UniqueFd> files_;
  std::vector<std::string> lost_;
};

}  // namespace hyrun
