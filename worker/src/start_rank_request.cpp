// Rank 0's request to its hyrun, over the control channel, to start a rank of the launch now.
#include "hyrun/common/start_rank_request.hpp"

#include <fmt/format.h>
#include <sys/socket.h>

#include <cerrno>

#include "hyrun/common/env_contract.hpp"
#include "hyrun/worker.hpp"

namespace hyrun {

void request_rank_start(int rank) {
  const RankEnvironment contract = RankEnvironment::from_environment();
  if (contract.rank != 0)
    throw Error(fmt::format("request_rank_start: rank {} asked; only rank 0 may start ranks", contract.rank));
  if (rank < 1 || rank >= contract.world_size)
    throw UsageError(
        fmt::format("request_rank_start: {} is not a rank other than 0 of the world of {}", rank, contract.world_size));
  if (!contract.control_fd)
    throw Error(fmt::format("request_rank_start: {} is not set: this hyrun gives no control channel", env::kControlFd));
  const std::string message = format_start_rank_request(rank);
  ssize_t n;
  do n = ::send(*contract.control_fd, message.data(), message.size(), MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(message.size()))
    throw SystemError(fmt::format("request_rank_start: writing to {} (fd {})", env::kControlFd, *contract.control_fd),
                      errno);
}

}  // namespace hyrun
