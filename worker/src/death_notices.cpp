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
#include <vector>

#include "hyrun/common/death_notice.hpp"
#include "hyrun/common/env_contract.hpp"
#include "hyrun/common/error.hpp"
#include "worker_log.hpp"

namespace hyrun {

DeathNotices::DeathNotices(int control_fd, int world_size, int own_rank)
    : fd_(control_fd),
      world_size_(world_size),
      own_rank_(own_rank),
      watches_(static_cast<std::size_t>(world_size)),
      dead_(std::make_unique<std::atomic<bool>[]>(static_cast<std::size_t>(world_size))) {
  ssize_t n;
  do n = ::send(fd_, kHandlesDeathsMessage.data(), kHandlesDeathsMessage.size(), MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(kHandlesDeathsMessage.size()))
    throw SystemError(
        fmt::format("rank {}: asking hyrun for peers' deaths on {} (fd {})", own_rank, env::kControlFd, fd_), errno);
  changed_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!changed_fd_) throw SystemError("eventfd (the reader of hyrun's death notices)", errno);
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
  watches_[static_cast<std::size_t>(rank)] = {};
  dead_[static_cast<std::size_t>(rank)].store(false, std::memory_order_release);
}

void DeathNotices::watch(int rank, const ProcessIdentity& process) {
  if (rank == own_rank_ || rank < 0 || rank >= world_size_ || !process.same_host(ProcessIdentity::own())) return;
  UniqueFd pidfd;
  try {
    pidfd = process.watch();
  } catch (const SystemError& e) {
    // Never a death that did not happen: unwatched, its death is found by the calls' timeouts.
    if (!watch_failed_) worker_log().warn("rank {}: cannot watch rank {}'s process: {}", own_rank_, rank, e.what());
    watch_failed_ = true;
    return;
  }
  std::lock_guard lock(mutex_);
  if (!pidfd) {
    worker_log().debug("rank {}: rank {}'s process {} has ended", own_rank_, rank, process.pid);
    mark_dead(rank);
    return;
  }
  watches_[static_cast<std::size_t>(rank)] = {std::move(pidfd), ++generation_};
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(changed_fd_.get(), &one, sizeof one);
}

void DeathNotices::mark_dead(int rank) {
  dead_[static_cast<std::size_t>(rank)].store(true, std::memory_order_release);
  if (worker_) ucp_worker_signal(worker_);  // thread-safe: writes the worker's event fd
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
          mark_dead(*rank);
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

void DeathNotices::on_watches(const std::vector<Polled>& polled, const std::vector<short>& revents) {
  for (std::size_t i = 0; i < polled.size(); ++i) {
    if (revents[i] == 0) continue;
    Watch& w = watches_[static_cast<std::size_t>(polled[i].rank)];
    if (!w.pidfd || w.generation != polled[i].generation) continue;  // replaced meanwhile
    worker_log().debug("rank {}: rank {}'s process on this host ended", own_rank_, polled[i].rank);
    w = {};
    mark_dead(polled[i].rank);
  }
}

void DeathNotices::run() {
  std::vector<pollfd> fds;
  std::vector<Polled> polled;
  for (;;) {
    fds = {{fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}, {changed_fd_.get(), POLLIN, 0}};
    polled.clear();
    {
      std::lock_guard lock(mutex_);
      for (int r = 0; r < world_size_; ++r)
        if (const Watch& w = watches_[static_cast<std::size_t>(r)]; w.pidfd) {
          fds.push_back({w.pidfd.get(), POLLIN, 0});
          polled.push_back({r, w.generation});
        }
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      worker_log().warn("rank {}: waiting for hyrun's death notices: {}", own_rank_, std::strerror(errno));
      return;
    }
    if (fds[1].revents) return;
    if (fds[2].revents) {
      uint64_t count;
      [[maybe_unused]] const ssize_t n = ::read(changed_fd_.get(), &count, sizeof count);
    }
    std::lock_guard lock(mutex_);
    if (fds[0].revents && !read_queued()) return;
    std::vector<short> revents;
    for (std::size_t i = 3; i < fds.size(); ++i) revents.push_back(fds[i].revents);
    on_watches(polled, revents);
  }
}

}  // namespace hyrun
