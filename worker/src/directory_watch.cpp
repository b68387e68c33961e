#include "directory_watch.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "hyrun/common/error.hpp"
#include "worker_log.hpp"

namespace hyrun {
namespace {

// The user's instances or watches are used up (or the kernel is short of memory for one):
// looking at the directory still works, where failing would end the rank.
bool out_of_inotify(int error) { return error == EMFILE || error == ENFILE || error == ENOMEM || error == ENOSPC; }

long long ms_left(std::chrono::steady_clock::time_point deadline) {
  return std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
}

}  // namespace

DirectoryWatch::DirectoryWatch(std::string dir, std::string context)
    : dir_(std::move(dir)), context_(std::move(context)) {
  UniqueFd watch(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  int error = errno;
  if (watch && ::inotify_add_watch(watch.get(), dir_.c_str(),
                                   IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR) >= 0) {
    inotify_ = std::move(watch);
    return;
  }
  if (watch) error = errno;
  if (!out_of_inotify(error))
    throw SystemError(fmt::format("{}: watching it{}", context_, watch ? "" : " (inotify_init1)"), error);
  worker_log().debug("{}: no inotify watch to be had ({}): looking at it every {} ms", context_, std::strerror(error),
                     kPollInterval.count());
}

DirectoryWatch::Change DirectoryWatch::wait(std::chrono::steady_clock::time_point deadline) {
  return inotify_ ? wait_inotify(deadline) : wait_polling(deadline);
}

DirectoryWatch::Change DirectoryWatch::wait_inotify(std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left = ms_left(deadline);
    if (left <= 0) return Change::kTimedOut;
    pollfd p{inotify_.get(), POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
    if (ready < 0 && errno != EINTR) throw SystemError(fmt::format("{}: waiting on it", context_), errno);
    if (ready <= 0) continue;
    alignas(inotify_event) char events[4096];
    const ssize_t n = ::read(inotify_.get(), events, sizeof events);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) throw SystemError(fmt::format("{}: reading its watch", context_), errno);
    for (ssize_t at = 0; at < n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(events + at);
      if ((event->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) != 0) return Change::kDirectoryGone;
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
    }
    return Change::kSomething;
  }
}

DirectoryWatch::Change DirectoryWatch::wait_polling(std::chrono::steady_clock::time_point deadline) {
  const auto left = ms_left(deadline);
  if (left <= 0) return Change::kTimedOut;
  std::this_thread::sleep_for(std::min(kPollInterval, std::chrono::milliseconds(left)));
  struct stat st {};
  if (::stat(dir_.c_str(), &st) == 0) return Change::kSomething;
  if (errno == ENOENT) return Change::kDirectoryGone;
  throw SystemError(fmt::format("{}: looking at it", context_), errno);
}

}  // namespace hyrun
