#pragma once
// What one hyrun needs to start its ranks, in local and hybrid mode alike: the binding
// plan of its node, the user's exports and the contract values shared by its ranks.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hyrun/binding/binding_plan.hpp"
#include "hyrun/common/env_contract.hpp"
#include "hyrun/launcher/launch_options.hpp"
#include "hyrun/launcher/mps_daemon.hpp"
#include "hyrun/launcher/rank_service.hpp"
#include "hyrun/launcher/rank_supervisor.hpp"

namespace hyrun {

/// A launch's place in its job, as its ranks' contract says it.
struct LaunchPlace {
  int world_size = 1;        ///< every rank of the job
  int local_world_size = 1;  ///< the ranks this launch starts (or the slots it plans for)
  int node_rank = 0;         ///< this launch's node
  int num_nodes = 1;         ///< the job's nodes
};
/// What every rank of a launch shares in its contract before the job's token, rank 0's
/// address and the rendezvous are known: `place`, the launch's bootstrap limit and whether
/// hyrun's stdout is a terminal. The one start of a contract, for hyrun's launch and
/// ep-elastic's staged launches alike.
RankEnvironment launch_contract(const LaunchOptions& options, const LaunchPlace& place);

class NodeLaunch {
 public:
  /// Computes the binding plan for this node's ranks (UsageError for bad binding input).
  /// `contract` holds the values shared by the node's ranks (world, node, token, timeout);
  /// global rank = rank_offset + local rank. `share` places this hyrun among the job's
  /// tasks on its node (hybrid mode), so that tasks sharing a node split its CPUs and GPUs.
  NodeLaunch(const LaunchOptions& options, RankEnvironment contract, int rank_offset,
             binding::NodeTaskShare share = {});

  /// Prints the plan when --report-bindings asks for it. Returns true under --dry-run
  /// (the caller then starts nothing); otherwise checks that the plan applies here and
  /// arranges MPS for ranks that share a GPU (--mps; a private daemon lives as long as
  /// this object, which must outlive the ranks).
  bool report_and_check();

  void set_root_address(std::string hex) { contract_.root_address_hex = std::move(hex); }
  void set_job_token(std::string token) { contract_.job_token = std::move(token); }
  /// The global rank of each local rank, for launches whose ranks were assigned elsewhere
  /// (an elastic job's later launch); without it, global rank = rank_offset + local rank.
  void set_global_ranks(std::vector<int> ranks) { global_ranks_ = std::move(ranks); }
  /// The rendezvous defaults of programs with their own bootstrap (docs/environment.md):
  /// MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID and, when `interface` is not empty,
  /// GLOO_SOCKET_IFNAME. Values the user set win.
  void set_rendezvous(std::string master_addr, int master_port, std::string run_id, std::string interface);
  const RankEnvironment& contract() const { return contract_; }
  const binding::BindingPlan& plan() const { return plan_; }
  /// Ranks get what they need to reach `service` (hyrun's PMIx or PMI server), in the order
  /// the services were added; `service` outlives this object.
  void add_service(RankService& service) { services_.push_back(&service); }

  /// The launch of one local rank: its environment (binding, exports, contract) and the
  /// binding to apply in the child.
  RankLaunch rank(int local_rank, bool publishes_address, int incarnation = 0) const;

  /// While `pending_dir` is not empty, ranks (other than the publishing one) are launched
  /// before rank 0's address and the job's token are known: with HYRUN_ROOT_PENDING set to
  /// it and without the values still to come (docs/architecture.md, "Ranks started before
  /// the exchange"). "" ends that.
  void defer_root(const std::string& pending_dir);
  /// What a rank launched while the root was deferred lacks now: the "NAME=value" entries of
  /// its environment today that its start did not have (pending_environment.hpp).
  std::vector<std::string> pending_environment(int local_rank) const;

 private:
  const LaunchOptions& options_;
  RankEnvironment contract_;
  int rank_offset_;
  std::vector<int> global_ranks_;  // empty: rank_offset_ + local rank
  std::vector<std::string> exports_;
  std::vector<std::pair<std::string, std::string>> node_defaults_;  // GLOO_SOCKET_IFNAME
  binding::BindingPlan plan_;
  int node_tasks_ = 1;                                        // hyrun tasks of the job on this node
  std::unique_ptr<MpsDaemon> mps_;                            // a private daemon (--mps)
  std::vector<std::pair<std::string, std::string>> mps_env_;  // its client variables for the ranks
  std::vector<RankService*> services_;
  // While the root is deferred: the contract and node defaults the early ranks started with.
  struct EarlyStart {
    RankEnvironment contract;
    std::vector<std::pair<std::string, std::string>> node_defaults;
  };
  std::optional<EarlyStart> early_;
  std::string root_pending_dir_;  // "": ranks get everything at their start

  RankEnvironment contract_of(RankEnvironment e, int local_rank) const;
  std::vector<std::string> environment_of(const RankEnvironment& e, int local_rank,
                                          const std::vector<std::pair<std::string, std::string>>& node_defaults) const;

  void arrange_mps();
};

}  // namespace hyrun
