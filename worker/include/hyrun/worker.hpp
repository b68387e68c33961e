#pragma once
// The hyrun worker library: what a program started by hyrun calls to join its job.
//
//   hyrun::World world;            // reads the environment contract and connects
//   world.barrier();
//   auto all = world.allgather(my_bytes);
//
// Constructing a World reads the contract (docs/environment.md), creates the UCP
// context and worker, and connects: rank 0 publishes its worker address on the fd
// hyrun gave it and admits joins that present the job token; every other rank joins
// rank 0 with the root address; rank 0 sends every rank the full address table; every
// rank ends with an endpoint to every other rank. Every wait is bounded by the
// bootstrap timeout (HYRUN_BOOTSTRAP_TIMEOUT_MS, or WorldOptions::timeout).
// Errors are thrown as hyrun::Error (see hyrun/common/error.hpp).
#include <ucp/api/ucp.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hyrun/common/error.hpp"
#include "hyrun/common/index_list.hpp"  // format_index_list, part of this API

namespace hyrun {

struct WorldOptions {
  /// The program handles peers' deaths (elastic jobs): an operation that needs a dead peer
  /// throws at once, and hyrun is asked (control socket, "handles-deaths v1") to report
  /// other ranks' deaths, which peer_failed() then tells: those of this node's ranks as soon
  /// as hyrun reaps them, and those of a lost node's ranks. Endpoints to this node's ranks
  /// therefore keep shared memory; the others use UCP_ERR_HANDLING_MODE_PEER (without a
  /// control socket, all of them, and UCX 1.13 then uses no shared memory). Without this
  /// option, endpoints to other nodes (and all endpoints when UCX_TLS allows no shared
  /// memory) still use the peer mode, so that a dead peer is never fatal inside UCX; an
  /// operation that needs the dead peer then waits a few seconds for hyrun to stop this
  /// rank for the peer's failure, and only then throws.
  bool peer_error_handling = false;
  /// Time limit of every wait during connection and collectives; default: the contract's
  /// HYRUN_BOOTSTRAP_TIMEOUT_MS.
  std::optional<std::chrono::milliseconds> timeout;
  /// UCP features requested in addition to tag matching (e.g. UCP_FEATURE_RMA). AM: the EP
  /// transport sends its writes as active messages where UCX would emulate RMA (tcp).
  uint64_t extra_ucp_features = UCP_FEATURE_RMA | UCP_FEATURE_AM;
  /// Largest message send(), recv() and each allgatherv() contribution carry. A larger
  /// send throws; a larger incoming message is refused (logged, never read into memory).
  std::size_t max_message_bytes = std::size_t{1} << 30;
};

/// The effective placement of this rank, read back from the system (not from hyrun's plan).
struct RankBinding {
  std::vector<int> cpus;          ///< OS indexes of the CPUs this process may run on
  std::vector<int> memory_nodes;  ///< NUMA nodes of the memory policy; empty = no binding
  std::string visible_gpus;       ///< CUDA_VISIBLE_DEVICES, or "" when unset
  std::string ucx_net_devices;    ///< UCX_NET_DEVICES, or "" when unset (UCX chooses)
  std::string ucx_tls;            ///< UCX_TLS, or "" when unset
  /// "cpus=0-3 mem=0 gpus=1 ucx_net_devices=mlx5_1:1 ucx_tls=all"
  std::string describe() const;
};

/// Tells hyrun that this process will next exit with `exit_code`, on purpose: that exit is
/// not a failure. Any other end (another code, a signal) still fails the job. With
/// `respawn`, hyrun then starts a new process for this rank (HYRUN_INCARNATION + 1), which
/// joins again with World (see World::incarnation), at most `hyrun --max-restarts` times.
/// Throws Error when hyrun gave no control channel (HYRUN_CONTROL_FD unset). Rank 0 cannot
/// be restarted: it publishes the job's root address.
void announce_planned_exit(bool respawn, int exit_code = 0);

/// The same for a death by `signal` that this process is about to cause itself (e.g.
/// raise(SIGKILL) to test failure handling): only that signal is excused.
void announce_planned_kill(bool respawn, int signal);

/// Rank 0 only: asks hyrun to start a rank of its launch now (its first process, or a new
/// one after the last ended), for programs that start ranks when they need them. The new
/// process joins late (accept_rejoins). A launch that cannot start it (the rank is not
/// one of its ranks, or is running) refuses with a warning in hyrun's log; the program
/// notices that the rank never joins. Throws Error without a control channel.
void request_rank_start(int rank);

class World {
 public:
  /// Reads the contract and connects to every other rank. Throws
  /// Error("not started by hyrun: HYRUN_RANK is not set") outside hyrun.
  explicit World(const WorldOptions& options = {});
  ~World();
  World(World&&) noexcept;
  World& operator=(World&&) noexcept;
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int rank() const;
  int size() const;
  int local_rank() const;
  int local_size() const;
  int node_rank() const;
  int num_nodes() const;
  std::chrono::milliseconds timeout() const;

  /// Returns when every rank has entered it.
  void barrier();
  /// Every rank contributes `mine` (any size); returns every rank's contribution, by rank.
  std::vector<std::vector<std::byte>> allgatherv(std::span<const std::byte> mine);
  /// Equal-size contributions, concatenated by rank. Throws if sizes differ.
  std::vector<std::byte> allgather(std::span<const std::byte> mine);
  /// Point-to-point bytes; messages with the same (peer, tag) arrive in order. send()
  /// returns when the message is delivered (a large one waits for the matching recv);
  /// messages to oneself are queued, so send(rank()) then recv(rank()) works.
  void send(int peer, std::span<const std::byte> data, uint32_t tag = 0);
  std::vector<std::byte> recv(int peer, uint32_t tag = 0);

  RankBinding binding() const;

  // ---- Elastic jobs: ranks whose process hyrun restarted (see respawn_after_exit) ----

  /// 0 for the first process of this rank, k after hyrun restarted it k times. A World
  /// constructed with incarnation > 0, or for a rank outside HYRUN_START_RANKS (one started
  /// late, or by another launch), does not take part in the collective start: it joins
  /// rank 0 and waits (bounded by the timeout) for rank 0 to admit it with
  /// accept_rejoins(); it then has endpoints to every rank in rank 0's current table.
  int incarnation() const;
  /// This process's own UCX worker address.
  std::vector<std::byte> own_address() const;
  struct Rejoin {
    int rank;
    std::vector<std::byte> address;
    int node;  ///< the node it joined from (HYRUN_NODE_RANK of its launch)
    /// Who the process is (opaque; empty when unknown): pass it on to replace_peer, so
    /// that ranks of its host watch it (its death is then known at once, whichever hyrun
    /// started it).
    std::vector<std::byte> process;
  };
  /// Rank 0 only, non-blocking: admits every restarted rank whose join has arrived
  /// (token checked), replaces its endpoint, sends it the current address table, and
  /// returns who rejoined with their new addresses and nodes (to pass on to the other ranks).
  std::vector<Rejoin> accept_rejoins();
  /// `peer`'s process was replaced: force-closes the old endpoint and connects to
  /// `address`; clears the peer's failed mark. `node`: the new process's node, when it may
  /// differ from the old one's (a rank brought by another launch). Both ends of a pair must
  /// agree on it: it decides whether their endpoints use UCX's peer error handling.
  /// `process`: the Rejoin's, when known. Throws Error on a malformed `process`.
  void replace_peer(int peer, std::span<const std::byte> address, std::optional<int> node = std::nullopt,
                    std::span<const std::byte> process = {});
  /// Ranks whose endpoint reported a failure or that hyrun reported dead (only with
  /// peer_error_handling), ascending.
  std::vector<int> failed_peers() const;
  bool peer_failed(int peer) const;

  /// Low-level access for one-sided transports built on this world (valid while it lives;
  /// release what you make from them, e.g. remote keys and requests, before it ends).
  ucp_context_h ucp_context() const;
  ucp_worker_h ucp_worker() const;
  /// The endpoint to `peer`, connected on first use; nullptr when it is unreachable. Wait
  /// for requests on these handles with the owners of hyrun/ucx/ (request.hpp).
  ucp_ep_h endpoint(int peer) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hyrun
