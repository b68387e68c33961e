#pragma once
// Errors of hyrun and of the worker library. Every failure is an exception that
// carries its context as one readable sentence and the process exit code it maps to;
// `main` catches it once and prints it as one line.
#include <stdexcept>
#include <string>

namespace hyrun {

/// Exit codes of hyrun itself (a rank's own exit code is passed through unchanged,
/// and a rank killed by signal S gives 128+S). Documented in docs/cli.md.
namespace exit_code {
inline constexpr int kSuccess = 0;
inline constexpr int kLauncherError = 1;    ///< bootstrap, PMIx, system-call or internal failure
inline constexpr int kUsage = 2;            ///< bad command line or bad input file
inline constexpr int kTimeout = 124;        ///< a wait reached its time limit
inline constexpr int kNotExecutable = 126;  ///< the program exists but cannot be executed
inline constexpr int kNotFound = 127;       ///< the program was not found

/// The exit code of a failure reported with `status` (MPI_Abort's, PMIx_Abort's): the
/// status as an exit code keeps it (its low 8 bits), and 1 where those are 0 (0, 256,
/// INT_MIN, ...), so that a failure never reads as success.
int of_failure_status(int status);
}  // namespace exit_code

/// Base of every hyrun error: a message and the exit code it should produce.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, int exit_code = exit_code::kLauncherError)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const noexcept { return exit_code_; }

 private:
  int exit_code_;
};

/// Bad user input: the message names the input, what is wrong and what would be right.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(message, exit_code::kUsage) {}
};

/// A wait that reached its limit: the message says how long and for what.
class TimeoutError : public Error {
 public:
  explicit TimeoutError(const std::string& message) : Error(message, exit_code::kTimeout) {}
};

/// A failed system call: "what: strerror(errno)".
class SystemError : public Error {
 public:
  SystemError(const std::string& what, int errnum);
  int errnum() const noexcept { return errnum_; }

 private:
  int errnum_;
};

}  // namespace hyrun
