// The rank's side of the control channel to its hyrun (HYRUN_CONTROL_FD).
#include "hyrun/common/planned_exit.hpp"

#include <fmt/format.h>
#include <sys/socket.h>

#include <cerrno>

#include "hyrun/common/env_contract.hpp"
#include "hyrun/worker.hpp"

namespace hyrun {
namespace {

void announce(const PlannedExit& planned) {
  const RankEnvironment contract = RankEnvironment::from_environment();
  if (!contract.control_fd)
    throw Error(
        fmt::format("announce_planned_exit: {} is not set: this hyrun gives no control channel", env::kControlFd));
  if (planned.respawn && contract.rank == 0)
    throw Error("announce_planned_exit: rank 0 cannot be restarted (it publishes the job's address)");
  const std::string message = format_planned_exit(planned);
  ssize_t n;
  do n = ::send(*contract.control_fd, message.data(), message.size(), MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(message.size()))
    throw SystemError(
        fmt::format("announce_planned_exit: writing to {} (fd {})", env::kControlFd, *contract.control_fd), errno);
}

}  // namespace

void announce_planned_exit(bool respawn, int exit_code) {
  if (exit_code < 0 || exit_code > 255)
    throw UsageError(
        fmt::format("announce_planned_exit: exit code {} is not one a process can exit with (0..255)", exit_code));
  announce({.respawn = respawn, .exit_code = exit_code, .signal = 0});
}

void announce_planned_kill(bool respawn, int signal) {
  if (signal < 1 || signal > 64)
    throw UsageError(fmt::format("announce_planned_kill: {} is not a signal number (1..64)", signal));
  announce({.respawn = respawn, .exit_code = 0, .signal = signal});
}

}  // namespace hyrun
