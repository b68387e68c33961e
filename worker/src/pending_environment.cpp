#include "pending_environment.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "hyrun/common/error.hpp"
#include "hyrun/common/pending_environment.hpp"
#include "hyrun/common/unique_fd.hpp"
#include "hyrun/common/user_directory.hpp"

namespace hyrun {
namespace {

// Only this user may have put the file there: the directory is this user's and no one
// else may write in it (hyrun made it with mode 0700).
void check_private(const std::string& dir, int rank) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    throw SystemError(fmt::format("rank {}: {}={}", rank, env::kRootPending, dir), errno);
  // The real uid: hyrun made the directory as the user who started the rank, setuid or not.
  if (const auto why = others_can_change(st, ::getuid()))
    throw Error(fmt::format("rank {}: {}={} is not a directory of this user that only it can write to: {}", rank,
                            env::kRootPending, dir, why->what));
}

// The file's content, or std::nullopt while it is not there.
std::optional<std::string> read_if_there(const std::string& path, int rank) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    if (errno == ENOENT) return std::nullopt;
    throw SystemError(fmt::format("rank {}: opening {}", rank, path), errno);
  }
  std::string content;
  char chunk[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw SystemError(fmt::format("rank {}: reading {}", rank, path), errno);
    if (n == 0) return content;
    content.append(chunk, static_cast<std::size_t>(n));
    if (content.size() > kMaxPendingEnvironmentBytes)
      throw Error(fmt::format("rank {}: {} holds over {} bytes: not a pending environment", rank, path,
                              kMaxPendingEnvironmentBytes));
  }
}

// Waits for an event on the directory; false when the directory went (hyrun ended).
bool wait_for_change(int watch, int rank, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0)
      throw TimeoutError(fmt::format("rank {}: hyrun did not give rank 0's address ({}) within the bootstrap limit",
                                     rank, env::kRootPending));
    pollfd p{watch, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
    if (ready < 0 && errno != EINTR)
      throw SystemError(fmt::format("rank {}: waiting on {}", rank, env::kRootPending), errno);
    if (ready <= 0) continue;
    alignas(inotify_event) char events[4096];
    const ssize_t n = ::read(watch, events, sizeof events);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) throw SystemError(fmt::format("rank {}: reading the watch of {}", rank, env::kRootPending), errno);
    for (ssize_t at = 0; at < n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(events + at);
      if ((event->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) != 0) return false;
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
    }
    return true;
  }
}

}  // namespace

RankEnvironment receive_pending_environment(const RankEnvironment& contract,
                                            std::chrono::steady_clock::time_point deadline) {
  if (contract.root_pending_dir.empty()) return contract;
  const std::string& dir = contract.root_pending_dir;
  const int rank = contract.rank;
  check_private(dir, rank);
  UniqueFd watch(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  if (!watch) throw SystemError(fmt::format("rank {}: inotify_init1 (to wait on {})", rank, env::kRootPending), errno);
  if (::inotify_add_watch(watch.get(), dir.c_str(),
                          IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR) < 0)
    throw SystemError(fmt::format("rank {}: watching {}={}", rank, env::kRootPending, dir), errno);
  const std::string path = dir + "/" + pending_environment_file(rank);
  std::optional<std::string> content;
  // Looked for after the watch exists, so that a file renamed in meanwhile is not missed.
  while (!(content = read_if_there(path, rank)))
    if (!wait_for_change(watch.get(), rank, deadline) && !(content = read_if_there(path, rank)))
      throw Error(fmt::format("rank {}: {}={} was removed before hyrun gave rank 0's address there (hyrun ended)", rank,
                              env::kRootPending, dir));
  const auto entries = parse_pending_environment(*content);
  if (!entries) throw Error(fmt::format("rank {}: {} is not a pending environment from hyrun", rank, path));
  for (const auto& entry : *entries) {
    const auto eq = entry.find('=');
    if (::setenv(entry.substr(0, eq).c_str(), entry.c_str() + eq + 1, 1) != 0)
      throw SystemError(fmt::format("rank {}: setenv {}", rank, entry.substr(0, eq)), errno);
  }
  ::unsetenv(env::kRootPending);
  return RankEnvironment::from_environment();
}

}  // namespace hyrun
