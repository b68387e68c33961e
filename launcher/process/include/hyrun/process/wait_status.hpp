#pragma once
// How a process ended, as waitpid reports it, in the words and exit codes users expect.
#include <string>

namespace hyrun {

/// "SIGKILL" for 9; "signal 64" for a number without a name.
std::string signal_name(int signal);

struct ProcessEnd {
  int wait_status = 0;
  bool failed() const;    ///< non-zero exit or death by signal
  int exit_code() const;  ///< the exit code, or 128 + signal
  /// "exited with code 3" / "was killed by signal 9 (SIGKILL)" / "exited normally"
  std::string describe() const;
};

}  // namespace hyrun
