#include "death_notices.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "hyrun/common/death_notice.hpp"
#include "hyrun/common/env_contract.hpp"
#include "hyrun/common/error.hpp"
#include "worker_log.hpp"

namespace hyrun {

DeathNotices::DeathNotices(int control_fd, int world_size, int own_rank)
    : fd_(control_fd),
      world_size_(world_size),
      own_rank_(own_rank),
      dead_(std::make_unique<std::atomic<bool>[]>(static_cast<std::size_t>(world_size))) {
  ssize_t n;
  do n = ::send(fd_, kHandlesDeathsMessage.data(), kHandlesDeathsMessage.size(), MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(kHandlesDeathsMessage.size()))
    throw SystemError(
        fmt::format("rank {}: asking hyrun for peers' deaths on {} (fd {})", own_rank, env::kControlFd, fd_), errno);
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (stop_fd_ < 0) throw SystemError("eventfd (the reader of hyrun's death notices)", errno);
  // The reader takes no signal meant for the program (its handlers run on the main thread).
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  try {
    reader_ = std::thread([this] { run(); });
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    ::close(stop_fd_);
    throw;
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

DeathNotices::~DeathNotices() {
  const uint64_t one = 1;
  if (::write(stop_fd_, &one, sizeof one) < 0) {
    // cannot happen on an eventfd below its maximum; the thread would then end with hyrun's channel
  }
  if (reader_.joinable()) reader_.join();
  ::close(stop_fd_);
}

void DeathNotices::forget(int rank) {
  std::lock_guard lock(mutex_);
  read_queued();
  dead_[static_cast<std::size_t>(rank)].store(false, std::memory_order_release);
}

void DeathNotices::wake_on_notice(ucp_worker_h worker) {
  std::lock_guard lock(mutex_);
  worker_ = worker;
}

bool DeathNotices::read_queued() {
  char message[256];
  for (;;) {
    const ssize_t n = ::recv(fd_, message, sizeof message, MSG_DONTWAIT);
    if (n > 0) {
      const std::string_view text(message, static_cast<std::size_t>(n));
      if (const auto rank = parse_rank_died(text, world_size_)) {
        if (*rank != own_rank_) {
          worker_log().debug("rank {}: hyrun reports that rank {} died", own_rank_, *rank);
          dead_[static_cast<std::size_t>(*rank)].store(true, std::memory_order_release);
          if (worker_) ucp_worker_signal(worker_);  // thread-safe: writes the worker's event fd
        }
      } else {
        worker_log().warn("rank {}: an unknown message from hyrun on {} was ignored: '{:.60}'", own_rank_,
                          env::kControlFd, text);
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;  // 0: hyrun closed it (it is gone, and this process with it); or an error
  }
}

void DeathNotices::run() {
  for (;;) {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      worker_log().warn("rank {}: waiting for hyrun's death notices: {}", own_rank_, std::strerror(errno));
      return;
    }
    if (fds[1].revents) return;
    if (fds[0].revents) {
      std::lock_guard lock(mutex_);
      if (!read_queued()) return;
    }
  }
}

}  // namespace hyrun
