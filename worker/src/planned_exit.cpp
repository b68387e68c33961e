// The rank's side of the control channel to its hyrun (HYRUN_CONTROL_FD).
#include <fmt/format.h>
#include <sys/socket.h>

#include <cerrno>

#include "hyrun/common/env_contract.hpp"
#include "hyrun/worker.hpp"

namespace hyrun {

void announce_planned_exit(bool respawn) {
  const RankEnvironment contract = RankEnvironment::from_environment();
  if (!contract.control_fd)
    throw Error(fmt::format("announce_planned_exit: {} is not set: this hyrun gives no control channel",
                            env::kControlFd));
  if (respawn && contract.rank == 0)
    throw Error("announce_planned_exit: rank 0 cannot be restarted (it publishes the job's address)");
  const std::string message = format_planned_exit(respawn);
  ssize_t n;
  do n = ::send(*contract.control_fd, message.data(), message.size(), MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(message.size()))
    throw SystemError(fmt::format("announce_planned_exit: writing to {} (fd {})", env::kControlFd, *contract.control_fd),
                      errno);
}

}  // namespace hyrun
