#pragma once
// The message a rank sends on its control channel (HYRUN_CONTROL_FD) before an exit that is
// planned, and its parser. The message states how the exit will end, so that hyrun excuses
// that one end only: a rank that announced `exit 0` and then exits 42 or is SIGKILLed failed.
#include <optional>
#include <string>
#include <string_view>

namespace hyrun {

struct PlannedExit {
  bool respawn = false;  ///< hyrun starts a new process for the rank afterwards
  int exit_code = 0;     ///< the status the process will exit with (when signal is 0), 0..255
  int signal = 0;        ///< else the signal that will end it, 1..64
  bool operator==(const PlannedExit&) const = default;
  /// True when `wait_status` (as waitpid reports it) is the announced end.
  bool matches(int wait_status) const;
  /// "exit with code 3" / "death by signal 9 (SIGKILL)"
  std::string describe() const;
};

/// "planned-exit v2 respawn=0|1 exit=N" or "planned-exit v2 respawn=0|1 signal=N".
std::string format_planned_exit(const PlannedExit& planned);
/// std::nullopt if `message` is not exactly such a message with values in range.
std::optional<PlannedExit> parse_planned_exit(std::string_view message);

}  // namespace hyrun
