#include "hyrun/link/link_tree.hpp"

#include <fmt/format.h>

#include "hyrun/common/error.hpp"

namespace hyrun {

LinkTree::LinkTree(int width, int tasks, std::vector<bool> can_parent) : width_(width) {
  if (width < 1 || width > kMaxWidth)
    throw UsageError(fmt::format("a tree width of {} is out of range: give 1 to {}", width, kMaxWidth));
  if (tasks < 1) throw Error(fmt::format("a tree of {} tasks: a job has at least one", tasks));
  parents_.assign(static_cast<std::size_t>(tasks), -1);
  for (int t = 1; t < tasks; ++t) {
    int p = (t - 1) / width;
    while (p != 0 && static_cast<std::size_t>(p) < can_parent.size() && !can_parent[static_cast<std::size_t>(p)])
      p = parents_[static_cast<std::size_t>(p)];  // p < t: already settled
    parents_[static_cast<std::size_t>(t)] = p;
  }
}

int LinkTree::parent(int task) const {
  if (task < 0 || task >= tasks()) return -1;
  return parents_[static_cast<std::size_t>(task)];
}

bool LinkTree::within(int task, int of) const {
  if (of < 0 || of >= tasks()) return false;
  for (int t = task; t >= 0; t = parent(t))  // parents have lower indices: at most the tree's depth
    if (t == of) return true;
  return false;
}

std::vector<int> LinkTree::children(int task) const {
  std::vector<int> out;
  for (int t = 1; t < tasks(); ++t)
    if (parents_[static_cast<std::size_t>(t)] == task) out.push_back(t);
  return out;
}

}  // namespace hyrun
