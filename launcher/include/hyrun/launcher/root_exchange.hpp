#pragma once
// What the hyrun processes of a job tell each other before their ranks start
// (docs/architecture.md, The PMIx exchange): every node's record, the root's record, one
// fence. The launch sequence (launch_sequence.hpp) drives it; each launch mode provides
// one: local mode has nothing to exchange, hybrid mode uses PMIx put, fence, get, abort.
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hyrun/binding/node_share.hpp"
#include "hyrun/common/error.hpp"

namespace hyrun::pmix {
class ClientProcess;
}

namespace hyrun {

class NodeLaunch;

/// What every node says of itself.
struct NodeRecord {
  int ranks = 0;     ///< its -n
  std::string host;  ///< its host name
  /// Set when its launch failed before the exchange (it still joins the fence).
  std::optional<std::string> error;
  int exit_code = exit_code::kLauncherError;  ///< with `error`
  int tree_width = 0;                         ///< its --tree-width (0: not said)
  std::optional<int> link_port;               ///< where its children connect (node_link.hpp), if it has any
  std::vector<std::string> link_addresses;    ///< with link_port: its IPv4 addresses, "a.b.c.d/prefix"
};

/// What the root (task 0) says to every node.
struct RootRecord {
  int ranks = 0;
  int world_size = 0;
  std::string job_token;
  std::optional<std::string> root_address;  ///< rank 0's UCX address (hex), under --bootstrap=ucx
  /// MASTER_ADDR candidates as "a.b.c.d/prefix"; absent when the root could not list them.
  std::optional<std::vector<std::string>> master_addresses;
  std::optional<int> master_port;
  std::optional<int> link_port;  ///< the node link's port (node_link.hpp)
  /// Set when the root failed before publishing (then only `error` and `exit_code` count).
  std::optional<std::string> error;
  int exit_code = exit_code::kLauncherError;
};

/// The job as hyrun serves it over PMIx (docs/pmix.md): one namespace, the same on every
/// node and unique per job (MPI libraries derive job ids and segment names from it), and
/// each task's host, distinct (libpmix's node map).
struct ServedJob {
  std::string nspace;
  std::vector<std::string> hosts;
};

/// One launch mode's way of exchanging the records. Calls wait at most the limit given
/// (TimeoutError past it) and report other failures as Error.
class RootExchange {
 public:
  virtual ~RootExchange() = default;

  /// This hyrun's task in the job (0 is the root) and the number of tasks.
  virtual int task() const = 0;
  virtual int tasks() const = 0;
  /// How the job's tasks on this node share it (binding).
  virtual binding::NodeTaskShare task_share() const = 0;
  virtual std::string host() const = 0;
  /// True when processes beyond this hyrun take part (other nodes, the PMIx server): an
  /// error that not every node saw then ends the job through abort(), and the nodes keep
  /// a node link. False for a launch that is the whole job (local mode): its errors are
  /// simply thrown.
  virtual bool has_peers() const = 0;
  /// The job as hyrun's PMIx server describes it to the ranks (the same on every node);
  /// nullopt: hyrun serves no PMIx (a sequence tested without libpmix's server).
  virtual std::optional<ServedJob> served_job() const = 0;

  /// Root: sets MASTER_ADDR/MASTER_PORT for programs with their own bootstrap on `node`
  /// and offers what the other nodes need in `record`. Throws SystemError when there is
  /// none to offer (such programs then set their own).
  virtual void offer_rendezvous(RootRecord& record, NodeLaunch& node) = 0;
  /// Other nodes: sets on `node` the rendezvous the root offered in `record`, if any.
  virtual void take_rendezvous(const RootRecord& record, NodeLaunch& node) = 0;

  virtual void put_node(const NodeRecord& record) = 0;
  virtual void put_root(const RootRecord& record) = 0;
  /// Publishes what was put and waits for every task to do the same, at most `limit`
  /// (TimeoutError past it). Returns false at once when `stop_requested` returns true
  /// (checked while waiting): a signal to honour.
  virtual bool fence(std::chrono::milliseconds limit, const std::function<bool()>& stop_requested) = 0;
  /// After the fence: what every task put, in task order (asked for all at once: one wait,
  /// not one a task; each record within `limit` of the one before), and what the root put.
  /// nullopt at once when `stop_requested` (checked while waiting) returns true: a signal to
  /// honour. Throw Error for a record that is not one (a different hyrun protocol too).
  virtual std::optional<std::vector<NodeRecord>> node_records(std::chrono::milliseconds limit,
                                                              const std::function<bool()>& stop_requested) = 0;
  virtual std::optional<RootRecord> root_record(std::chrono::milliseconds limit,
                                                const std::function<bool()>& stop_requested) = 0;

  /// Ends the job on every node with `code`, saying `why` (this node has already told
  /// the user). Does not return.
  [[noreturn]] virtual void abort(int code, const std::string& why) = 0;

  /// The PMIx client of the launcher above (hybrid mode), for the ranks' fences across
  /// nodes (outer_fence.hpp); nullptr where there is none. It outlives the launch.
  virtual pmix::ClientProcess* outer_client() { return nullptr; }
};

}  // namespace hyrun
