#include "hyrun/common/job_layout.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "hyrun/common/error.hpp"

namespace hyrun {

JobLayout JobLayout::uniform(int tasks, int ranks_per_task) {
  if (tasks < 1) throw UsageError(fmt::format("a job has at least one task, not {}", tasks));
  std::vector<int> nodes(static_cast<std::size_t>(tasks));
  for (int t = 0; t < tasks; ++t) nodes[static_cast<std::size_t>(t)] = t;
  return of_tasks(std::vector<int>(static_cast<std::size_t>(tasks), ranks_per_task), nodes);
}

JobLayout JobLayout::of_tasks(const std::vector<int>& ranks_per_task, const std::vector<int>& node_of_task) {
  if (ranks_per_task.empty()) throw UsageError("a job has at least one task, not 0");
  if (ranks_per_task.size() != node_of_task.size())
    throw UsageError(fmt::format("a job layout of {} task counts and {} task nodes: one of each a task",
                                 ranks_per_task.size(), node_of_task.size()));
  JobLayout layout;
  long long first = 0;
  for (std::size_t t = 0; t < ranks_per_task.size(); ++t) {
    const int n = ranks_per_task[t], node = node_of_task[t];
    if (n < 1) throw UsageError(fmt::format("task {} of the job starts {} ranks: at least 1 is needed", t, n));
    if (node < 0 || node > layout.nodes_)
      throw UsageError(
          fmt::format("task {} is on node {}: nodes are numbered from 0 in the order of their first task "
                      "(the next new node is {})",
                      t, node, layout.nodes_));
    if (first + n > 0x7fffffff) throw UsageError("the job's tasks start more than 2^31-1 ranks");
    layout.tasks_.push_back(Task{static_cast<int>(first), n, node});
    if (node == layout.nodes_) ++layout.nodes_;
    first += n;
  }
  layout.world_size_ = static_cast<int>(first);
  return layout;
}

const JobLayout::Task& JobLayout::task(int t) const {
  if (t < 0 || t >= tasks()) throw Error(fmt::format("task {} is not one of the job's {} tasks", t, tasks()));
  return tasks_[static_cast<std::size_t>(t)];
}

int JobLayout::task_of(int rank) const {
  if (rank < 0 || rank >= world_size_)
    throw Error(fmt::format("rank {} is not one of the job's {} ranks", rank, world_size_));
  // The last task whose first rank is not above `rank`.
  const auto it =
      std::upper_bound(tasks_.begin(), tasks_.end(), rank, [](int r, const Task& task) { return r < task.first_rank; });
  return static_cast<int>(it - tasks_.begin()) - 1;
}

int JobLayout::global_rank(int t, int local) const {
  const Task& of = task(t);
  if (local < 0 || local >= of.ranks)
    throw Error(fmt::format("local rank {} is not one of task {}'s {} ranks", local, t, of.ranks));
  return of.first_rank + local;
}

int JobLayout::node_local_rank(int rank) const {
  const int t = task_of(rank), node = tasks_[static_cast<std::size_t>(t)].node;
  int before = 0;
  for (int u = 0; u < t; ++u)
    if (tasks_[static_cast<std::size_t>(u)].node == node) before += tasks_[static_cast<std::size_t>(u)].ranks;
  return before + rank - tasks_[static_cast<std::size_t>(t)].first_rank;
}

std::vector<int> JobLayout::ranks_on_node(int node) const {
  std::vector<int> ranks;
  for (const Task& t : tasks_)
    if (t.node == node)
      for (int r = 0; r < t.ranks; ++r) ranks.push_back(t.first_rank + r);
  return ranks;
}

std::string JobLayout::describe_task(int t, const std::string& host) const {
  const Task& of = task(t);
  return of.ranks == 1 ? fmt::format("rank {} on {}", of.first_rank, host)
                       : fmt::format("ranks {}-{} on {}", of.first_rank, of.first_rank + of.ranks - 1, host);
}

}  // namespace hyrun
