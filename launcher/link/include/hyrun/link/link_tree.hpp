#pragma once
// Which hyrun of a job watches which on the node link (node_link.hpp): a tree of the given
// width over the tasks, as Slurm's TreeWidth spreads its daemons' messages. Task t's parent
// is (t - 1) / width, so the root (task 0) watches tasks 1 to width, task 1 the next width,
// and so on; a width of tasks - 1 or more is the star. A task that cannot take children (its
// hyrun has no listening port) is passed over: its would-be children go to its parent.
// Every node computes the same tree from the same records, so no message says it.
//
// Watching is heartbeats and the silence limit: each hyrun beats to and judges only its
// parent and its children, so no hyrun does more than width + 1 of them a beat. The root's
// connection to every node (the PMIx relay, costs, byes) stays; without beats, a node's
// end is still seen there at once as the connection closing.
#include <vector>

namespace hyrun {

class LinkTree {
 public:
  static constexpr int kMaxWidth = 1 << 20;

  /// The star over one task (a tree is given by the launch once the job's size is known).
  LinkTree() : LinkTree(kMaxWidth, 1) {}
  /// `can_parent[t]` false: task t takes no children (empty: every task can).
  LinkTree(int width, int tasks, std::vector<bool> can_parent = {});

  int width() const { return width_; }
  int tasks() const { return static_cast<int>(parents_.size()); }
  /// The task that watches `task`; -1 for the root or a task out of range.
  int parent(int task) const;
  /// The tasks that `task` watches, in order.
  std::vector<int> children(int task) const;
  /// True when one of `a` and `b` is the other's parent.
  bool neighbours(int a, int b) const { return a != b && (parent(a) == b || parent(b) == a); }
  /// True when `task` is `of` or below it in the tree (what reaches the root through `of`).
  bool within(int task, int of) const;

 private:
  int width_;
  std::vector<int> parents_;
};

}  // namespace hyrun
