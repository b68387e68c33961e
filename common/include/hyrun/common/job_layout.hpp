#pragma once
// Where a job's ranks are: its tasks (one hyrun each; task 0 is the root) in order, each
// with its first global rank, its number of ranks and its node. Global ranks are numbered
// task by task: task t holds [first_rank(t), first_rank(t) + ranks(t)). The one place
// that says which task holds a rank, what a rank's local and node rank are, and how many
// ranks a node has; the launch, the PMIx service, the relay among the nodes and the loss
// of a node all read it.
//
// Today every task has the same -n and a node of its own (hybrid mode refuses different
// -n, docs/cli.md); the layout holds any counts and any grouping of tasks on nodes, so
// that neither is a special case where it is read.
#include <string>
#include <vector>

namespace hyrun {

class JobLayout {
 public:
  struct Task {
    int first_rank = 0;  ///< its first global rank
    int ranks = 0;       ///< how many ranks it starts (its -n)
    int node = 0;        ///< the index of its node
  };

  /// `tasks` tasks of `ranks_per_task` ranks, each on a node of its own (task t on node t).
  /// Throws UsageError unless tasks >= 1 and ranks_per_task >= 1.
  static JobLayout uniform(int tasks, int ranks_per_task);
  /// Task t starts ranks_per_task[t] ranks on node node_of_task[t]. Nodes are numbered from
  /// 0 in the order their first task comes. Throws UsageError (naming the task) for a count
  /// below 1, a node out of that order, sizes that differ, or no task.
  static JobLayout of_tasks(const std::vector<int>& ranks_per_task, const std::vector<int>& node_of_task);

  int tasks() const { return static_cast<int>(tasks_.size()); }
  int nodes() const { return nodes_; }
  /// Every rank of the job.
  int world_size() const { return world_size_; }
  const Task& task(int t) const;

  /// The task that holds global rank `rank` (0 <= rank < world_size(); Error otherwise).
  int task_of(int rank) const;
  /// `rank`'s index among its task's ranks.
  int local_rank(int rank) const { return rank - task(task_of(rank)).first_rank; }
  /// The global rank of task `t`'s local rank `local`.
  int global_rank(int t, int local) const;
  /// The node of global rank `rank`.
  int node_of(int rank) const { return task(task_of(rank)).node; }
  /// `rank`'s index among the ranks of its node (tasks of a node in task order).
  int node_local_rank(int rank) const;
  /// The global ranks on node `node`, ascending.
  std::vector<int> ranks_on_node(int node) const;
  /// "rank 4 on HOST" or "ranks 4-7 on HOST": task `t`'s ranks, for messages.
  std::string describe_task(int t, const std::string& host) const;

 private:
  std::vector<Task> tasks_;
  int nodes_ = 0;
  int world_size_ = 0;
};

}  // namespace hyrun
