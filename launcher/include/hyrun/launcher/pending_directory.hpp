#pragma once
// Where the ranks that hyrun starts before the exchange (docs/architecture.md, "Ranks
// started before the exchange") take the rest of their environment: a private directory
// (mode 0700) of this job, one file per rank (hyrun/common/pending_environment.hpp),
// removed with the job.
#include <string>
#include <vector>

#include "hyrun/process/private_directory.hpp"

namespace hyrun {

class PendingDirectory {
 public:
  /// Makes `$TMPDIR/hyrun-pending-XXXXXX`. Throws SystemError.
  static PendingDirectory create();

  const std::string& path() const { return dir_.path(); }
  /// Puts global rank `rank`'s file with `entries` ("NAME=value"): written whole under
  /// another name, then renamed into place, so that the rank never reads half of it.
  /// Throws SystemError.
  void put(int rank, const std::vector<std::string>& entries) const;
  /// Removes the directory now (an abort ends hyrun without destructors).
  void remove() noexcept { dir_.remove(); }

 private:
  explicit PendingDirectory(PrivateDirectory dir) : dir_(std::move(dir)) {}
  PrivateDirectory dir_;
};

}  // namespace hyrun
