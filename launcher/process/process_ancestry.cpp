#include "hyrun/process/process_ancestry.hpp"

#include <unistd.h>

#include <fstream>
#include <string>

namespace hyrun {
namespace {

// The parent of `pid` from /proc/<pid>/stat ("pid (comm) state ppid ..."), 0 if unknown.
// comm may hold spaces and parentheses: the fields start after the last ')'.
pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return 0;
  const auto close = stat.rfind(')');
  if (close == std::string::npos || close + 4 >= stat.size()) return 0;
  try {
    return static_cast<pid_t>(std::stol(stat.substr(close + 4)));  // skip ") S "
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

bool is_ancestor(pid_t pid) {
  if (pid <= 0) return false;
  // Bounded: a pid namespace has no cycles, but /proc may change under us.
  pid_t p = ::getppid();
  for (int depth = 0; p > 0 && depth < 4096; ++depth) {
    if (p == pid) return true;
    if (p == 1) return false;
    p = parent_of(p);
  }
  return false;
}

}  // namespace hyrun
