#pragma once
// Starting one rank process: fork + exec with everything a rank needs set up in the
// child before exec, and exec failures reported back to the parent.
//
// In the child (between fork and exec, async-signal-safe work only): its own process
// group; SIGKILL when the parent dies (PR_SET_PDEATHSIG); default dispositions and an
// empty mask for every signal; stdio redirected; extra fds placed at fixed numbers; every
// other fd closed on exec (fds hyrun inherited from its own parent do not leak into
// ranks); the soft open-file limit hyrun started with; the optional pre-exec hook
// (CPU/memory binding); then execvp. A failure there is written to
// a close-on-exec pipe, so the parent learns "exec worked" from EOF or the errno otherwise.
#include <sys/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "hyrun/common/error.hpp"

namespace hyrun {

struct SpawnSpec {
  std::vector<std::string> argv;         ///< argv[0] is looked up in PATH (execvp)
  std::vector<std::string> environment;  ///< complete, as NAME=value
  int stdin_fd = -1;                     ///< -1: /dev/null
  int stdout_fd = 1;
  int stderr_fd = 2;
  /// (fd in the parent, fd number in the child) pairs, e.g. the publish pipe.
  std::vector<std::pair<int, int>> inherited_fds;
  /// Runs in the child just before exec; must be async-signal-safe. Returns 0, or an errno
  /// value after writing a NUL-terminated message into the buffer.
  std::function<int(char* message, std::size_t length)> pre_exec;
  /// The soft RLIMIT_NOFILE the program gets (hyrun raised its own); 0: hyrun's.
  unsigned long open_file_soft_limit = 0;
  /// Not empty: the variable that the child sets to its own pid before exec, replacing any
  /// value in `environment` (SLURM_TASK_PID, as slurmstepd gives each task).
  std::string own_pid_variable;
};

/// The program could not be started: exit code 127 (not found) or 126 (not executable,
/// or the pre-exec step failed), with the path and the system's reason; 1 when hyrun
/// itself ran out of file descriptors (errnum() then is EMFILE).
class SpawnError : public Error {
 public:
  SpawnError(const std::string& message, int exit_code, int errnum = 0) : Error(message, exit_code), errnum_(errnum) {}
  int errnum() const noexcept { return errnum_; }

 private:
  int errnum_;
};

/// Starts the process; returns its pid (also its process group id). Throws SpawnError.
pid_t spawn(const SpawnSpec& spec);

}  // namespace hyrun
