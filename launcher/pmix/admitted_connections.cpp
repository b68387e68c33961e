#include "hyrun/pmix/admitted_connections.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <list>
#include <mutex>
#include <unordered_map>

namespace hyrun::pmix {
namespace {

std::mutex mutex;
struct Admitted {
  ino_t inode = 0;
  std::optional<pid_t> child;
};
std::unordered_map<int, Admitted> admitted;  // by descriptor, kept after judging: one per descriptor
std::list<AdmittedConnection> unjudged;      // bounded by the descriptors libpmix holds

std::optional<ino_t> inode_of(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return std::nullopt;
  return st.st_ino;
}

bool still_held(const AdmittedConnection& c) { return inode_of(c.fd) == c.inode; }

}  // namespace

void remember_admitted(int fd, std::optional<pid_t> child) {
  const auto inode = inode_of(fd);
  if (!inode) return;
  std::lock_guard lock(mutex);
  admitted[fd] = {*inode, child};
  std::erase_if(unjudged, [fd](const AdmittedConnection& c) { return c.fd == fd; });  // a reused number
  unjudged.push_back({.fd = fd, .inode = *inode, .admitted = std::chrono::steady_clock::now(), .child = child});
}

bool is_admitted(int fd) {
  const auto inode = inode_of(fd);
  if (!inode) return false;
  std::lock_guard lock(mutex);
  const auto it = admitted.find(fd);
  return it != admitted.end() && it->second.inode == *inode;
}

bool any_held_under(pid_t child) {
  std::lock_guard lock(mutex);
  return std::any_of(admitted.begin(), admitted.end(), [child](const auto& entry) {
    return entry.second.child == child && inode_of(entry.first) == entry.second.inode;
  });
}

std::set<pid_t> children_admitted() {
  std::lock_guard lock(mutex);
  std::set<pid_t> children;
  for (const auto& entry : admitted)
    if (entry.second.child) children.insert(*entry.second.child);
  return children;
}

bool any_admitted_unjudged() {
  std::lock_guard lock(mutex);
  return !unjudged.empty();
}

void judge_admitted(const std::function<bool(const AdmittedConnection&)>& judge) {
  std::lock_guard lock(mutex);
  std::erase_if(unjudged, [&judge](const AdmittedConnection& c) { return !still_held(c) || judge(c); });
}

}  // namespace hyrun::pmix
