#include "hyrun/process/adopted_orphans.hpp"

#include <dirent.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <fstream>
#include <set>
#include <vector>

#include "hyrun/common/unique_dir.hpp"

namespace hyrun {
namespace {
std::set<pid_t>& helpers() {
  static std::set<pid_t> pids;  // the main thread's: set and swept there
  return pids;
}

// Every child of this process but its helpers, from every thread's list.
std::vector<pid_t> children() {
  std::vector<pid_t> found;
  const UniqueDir tasks = open_directory("/proc/self/task");
  if (!tasks) return found;
  while (const dirent* task = ::readdir(tasks.get())) {
    if (task->d_name[0] == '.') continue;
    std::ifstream list(fmt::format("/proc/self/task/{}/children", task->d_name));
    for (pid_t pid; list >> pid;)
      if (!helpers().contains(pid)) found.push_back(pid);
  }
  return found;
}
}  // namespace

void spare_helper(pid_t pid) { helpers().insert(pid); }

void kill_adopted_orphans() {
  // Killing one may orphan its own children to us, hence rounds (bounded).
  for (int round = 0; round < 20; ++round) {
    std::vector<pid_t> found = children();
    if (found.empty()) return;
    for (pid_t pid : found) ::kill(pid, SIGKILL);
    // Reaped here, so that the next round sees only new orphans.
    std::size_t left = found.size();
    for (int wait = 0; wait < 100 && left > 0; ++wait) {
      for (pid_t& pid : found) {
        int status;
        if (pid > 0 && ::waitpid(pid, &status, WNOHANG) != 0) pid = 0, --left;
      }
      if (left > 0) ::usleep(10000);
    }
    if (left > 0) return;
  }
}

}  // namespace hyrun
