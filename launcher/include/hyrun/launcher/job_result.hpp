#pragma once
// How a job's ranks ended on this node, as the rank supervisor saw it (its finish()).
#include <optional>
#include <string>

namespace hyrun {

struct JobResult {
  int exit_code = 0;  ///< the job's exit status on this node (docs/cli.md)
  /// The signal to hyrun (SIGINT, SIGTERM, SIGHUP) that stopped the job, if one did.
  std::optional<int> stop_signal;
  /// The line that reported the first rank failure ("rank 5 (pid 1234) was killed ..."),
  /// when the job ended because a rank failed (not a signal to hyrun, not an error).
  std::optional<std::string> rank_failure;
};

}  // namespace hyrun
