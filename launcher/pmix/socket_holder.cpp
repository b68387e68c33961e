#include "hyrun/pmix/socket_holder.hpp"

#include <dirent.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <deque>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hyrun/common/unique_dir.hpp"

namespace hyrun::pmix {
namespace {

// A bound on the processes looked at, far above a node's ranks and their children.
constexpr std::size_t kMaxProcesses = std::size_t{1} << 16;

// The children of `pid`, from each of its threads' lists; false when the kernel has no lists.
bool add_children(pid_t pid, std::deque<pid_t>& to_visit) {
  const UniqueDir tasks = open_directory(fmt::format("/proc/{}/task", pid));
  if (!tasks) return true;  // it has just ended
  bool listed = false;
  while (const dirent* task = ::readdir(tasks.get())) {
    if (task->d_name[0] == '.') continue;
    std::ifstream list(fmt::format("/proc/{}/task/{}/children", pid, task->d_name));
    listed = listed || list.is_open();
    for (pid_t child; list >> child;) to_visit.push_back(child);
  }
  return listed;
}

bool holds(pid_t pid, std::string_view wanted) {
  const std::string fds = fmt::format("/proc/{}/fd", pid);
  const UniqueDir list = open_directory(fds);
  if (!list) return false;
  std::array<char, 64> target;
  while (const dirent* fd = ::readdir(list.get())) {
    if (fd->d_name[0] == '.') continue;
    const ssize_t n = ::readlink(fmt::format("{}/{}", fds, fd->d_name).c_str(), target.data(), target.size());
    if (n > 0 && std::string_view(target.data(), static_cast<std::size_t>(n)) == wanted) return true;
  }
  return false;
}

}  // namespace

SocketHolder find_holder(ino_t inode, const std::set<pid_t>& later) {
  const std::string wanted = fmt::format("socket:[{}]", inode);
  std::deque<pid_t> children;
  if (!add_children(::getpid(), children)) return {.known = false, .child = std::nullopt};
  // This process's children in the order they are looked at: those under which no connection
  // was admitted yet, the oldest first, then the others (`later`: a process of the job
  // connects once), the newest first. Ranks connect about in the order they were started: at
  // 256 local ranks the door looked at 1.3 processes a connection, against 66 newest first.
  const auto not_yet = std::stable_partition(children.begin(), children.end(),
                                             [&later](pid_t child) { return later.count(child) != 0; });
  std::reverse(not_yet, children.end());
  // Depth first, and below a child the newest first: the process that has just connected is
  // most often the newest of its child's tree, a rank just started or an inner hyrun's PMIx
  // client helper. Breadth first read every child's descriptors before a grandchild's:
  // serving 256 nested hyrun, 2.5 times the CPU (docs/security.md). Each process goes with the
  // child of this one it descends from.
  std::vector<std::pair<pid_t, pid_t>> to_visit;  // a stack: the next to look at on top
  for (const pid_t child : children) to_visit.emplace_back(child, child);
  std::set<pid_t> seen;
  std::deque<pid_t> found;
  SocketHolder result;
  while (!to_visit.empty() && seen.size() < kMaxProcesses) {
    const auto [pid, child] = to_visit.back();
    to_visit.pop_back();
    if (!seen.insert(pid).second) continue;
    ++result.looked_at;
    if (holds(pid, wanted)) {
      result.child = child;
      return result;
    }
    found.clear();
    add_children(pid, found);
    for (const pid_t grandchild : found) to_visit.emplace_back(grandchild, child);
  }
  return result;
}

}  // namespace hyrun::pmix
