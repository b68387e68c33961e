#pragma once
// The part of hyrun's options that the rank supervisor (rank_supervisor.hpp) acts on.
#include <chrono>
#include <string>
#include <vector>

namespace hyrun {

/// What the supervisor needs of hyrun's options (docs/cli.md names each).
struct SupervisorOptions {
  std::vector<std::string> command;                    ///< the program and its arguments, the same for every rank
  std::chrono::milliseconds bootstrap_timeout{60000};  ///< how long rank 0 may take to publish
  std::chrono::milliseconds grace_period{10000};       ///< from the stop signal to SIGKILL
  int max_restarts = 32;                               ///< restarts each rank may ask for
  bool label = false;                                  ///< --label
  bool timestamp_output = false;                       ///< --timestamp-output
  std::string output_filename;                         ///< --output-filename DIR ("" = none)
};

}  // namespace hyrun
