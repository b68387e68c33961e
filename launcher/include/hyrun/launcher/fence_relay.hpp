#pragma once
// The PMIx fences of a job across nodes, relayed by the nodes' hyrun processes over their
// node link (node_link.hpp), whose lines are sealed with the job token's session keys.
// Each node's PMIx server hands hyrun its part of the job's n-th fence once every rank of the
// node has joined it; another node sends that part to the root ("fence <n> <hex>"), the root
// joins every node's part in task order and sends the whole to every node
// ("fenced <n> <hex>"), and each node completes its server's fence with it. Fences over the
// whole job come in the same order on every node, so their numbers match.
//
// Contract: what a line carries is checked (a known fence number, hex, one part per node and
// fence) before it is used; a line that fails is the end of the link (handle() returns
// false). A fence that cannot complete (no link, a lost node) fails on every node that holds
// it when the relay goes: MPI_Init or MPI_Finalize then fail rather than wait.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hyrun/pmix/server.hpp"

namespace hyrun {

class NodeLink;

class FenceRelay {
 public:
  /// Task `task` of `hosts.size()` tasks with `ranks_per_task` ranks each; `link` (none:
  /// every fence fails, said once) must outlive the relay.
  FenceRelay(int task, std::vector<std::string> hosts, int ranks_per_task, NodeLink* link);
  ~FenceRelay() = default;
  FenceRelay(const FenceRelay&) = delete;
  FenceRelay& operator=(const FenceRelay&) = delete;

  /// This node's part of its next fence.
  void contribute(std::shared_ptr<pmix::PendingFence> fence);
  /// A line's body from `from_task` on the link; false when it is not one of the relay's.
  bool handle(int from_task, const std::string& body);
  /// Root: what the oldest open fence still waits for ("PMIx fence 2 waits for ranks 4-7
  /// on n2"); nullopt when no fence is open.
  std::optional<std::string> waiting() const;

 private:
  struct Open {
    std::map<int, std::string> parts;           // root: each task's part
    std::shared_ptr<pmix::PendingFence> local;  // this node's fence, until completed
  };
  void complete_if_whole(std::uint64_t number);
  bool take_part(int task, std::uint64_t number, const std::string& hex);
  bool take_whole(std::uint64_t number, const std::string& hex);

  const int task_;
  const std::vector<std::string> hosts_;
  const int ranks_per_task_;
  NodeLink* link_;
  std::uint64_t next_ = 0;       // this node's next fence number
  std::uint64_t completed_ = 0;  // root: fences below this number are done
  std::map<std::uint64_t, Open> open_;
};

}  // namespace hyrun
