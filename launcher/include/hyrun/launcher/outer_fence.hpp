#pragma once
// The PMIx relay's fences through the outer launcher's own PMIx fence (srun's, mpirun's, an
// outer hyrun's), so that a fence across nodes costs what a native launch's does: Slurm and
// PRRTE fence along a tree of their daemons, where the node link is a star whose hub is the
// root's hyrun (docs/pmix.md, "Across nodes"). Each node puts its part under a key named
// after the fence's number, through its PMIx client helper (pmix::ClientProcess), and takes
// every node's part from the data the fence collected, in task order.
//
// Contract: fences go out one at a time, in the order start() is called (the relay's fence
// numbers). Each ends in exactly one call of `done` or `failed`. Past `max_bytes` (every
// node's part together) the parts are dropped as they come and `done` gets nullopt with the
// total, the same on every node. No limit in time: the fence lasts as long as the job's
// nodes are alive, which the node link judges; the helper's end cancels it.
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hyrun/pmix/client_process.hpp"
#include "hyrun/process/poll_participant.hpp"

namespace hyrun {

/// --fences auto: a job of up to this many nodes fences over the node link, a larger one
/// through the outer launcher. Measured (docs/performance.md, "Fences across nodes: the node
/// link or the outer launcher"): the outer route costs each fence a few tens of ms more on
/// the 16-node testbed, while the link's root sends every node a copy of the whole, so its
/// bytes grow as nodes squared (120 MB for one fence of 128 nodes of 3.5 KiB each).
inline constexpr int kLinkFencesUpTo = 64;

class OuterFence final : public UntimedParticipant {
 public:
  /// A fence's parts, one a task in task order (nullopt past max_bytes), and their bytes.
  using Done =
      std::function<void(std::uint64_t number, std::optional<std::vector<std::string>> parts, std::size_t bytes)>;
  /// A fence that the outer launcher failed (or the helper's end): what was wrong.
  using Failed = std::function<void(std::uint64_t number, const std::string& why)>;

  OuterFence(pmix::ClientProcess& client, std::size_t max_bytes, Done done, Failed failed);
  /// Queues this node's part of fence `number`.
  void start(std::uint64_t number, std::string part);

  void add_poll_fds(std::vector<pollfd>& fds) override;
  bool on_poll(const pollfd& p) override;

 private:
  void next();
  // Takes one message of the open fence; false once it ended (done or failed).
  bool take_one();

  pmix::ClientProcess& client_;
  const std::size_t max_bytes_;
  Done done_;
  Failed failed_;
  std::deque<std::pair<std::uint64_t, std::string>> queued_;
  std::optional<std::uint64_t> open_;  // the fence in the outer launcher now
  std::vector<std::string> parts_;
  std::size_t bytes_ = 0;
};

}  // namespace hyrun
