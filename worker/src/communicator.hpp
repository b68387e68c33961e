#pragma once
// The connected side of a World: the UCP context and worker, an endpoint to every rank,
// sealed and bounded messages (message_auth.hpp) for collectives and point-to-point,
// and what this rank knows of failed and replaced peers. The bootstrap (bootstrap.hpp)
// fills its address table; World forwards its public calls here.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap_messages.hpp"
#include "death_notices.hpp"
#include "hyrun/common/env_contract.hpp"
#include "hyrun/ucx/context.hpp"
#include "hyrun/ucx/endpoint.hpp"
#include "hyrun/ucx/request.hpp"
#include "hyrun/ucx/worker.hpp"
#include "hyrun/worker.hpp"
#include "message_auth.hpp"

namespace hyrun {

class Communicator {
 public:
  using Clock = std::chrono::steady_clock;
  /// What a receive checks beyond the code: returns "" to accept, or why it refuses.
  using Check = std::function<std::string(const auth::Envelope&, std::vector<std::byte>&)>;

  /// Creates the context and worker (no endpoint yet) for `contract`. Throws Error.
  Communicator(RankEnvironment contract, const WorldOptions& options);
  /// Closes every endpoint under one short deadline and drops messages nobody received.
  ~Communicator();
  // Endpoints carry `this` to their failure handler: the object never moves.
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  const RankEnvironment& contract() const { return contract_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  Clock::time_point deadline() const { return Clock::now() + timeout_; }
  ucp_context_h context() const { return context_.get(); }
  ucp_worker_h worker() const { return worker_.get(); }
  /// Every rank's node and worker address, as last known (empty until connected).
  const std::vector<bootstrap::Peer>& table() const { return table_; }
  /// The process id of table()[rank].address.
  auth::ProcessId id_of(int rank) const { return ids_[static_cast<std::size_t>(rank)]; }
  /// This process's id (of its own worker address).
  auth::ProcessId own_id() const { return own_id_; }
  /// The directory this rank's environment came from (HYRUN_ROOT_PENDING; "" if none).
  const std::string& pending_dir() const { return pending_dir_; }

  /// An endpoint to `peer` (peer error handling where its node needs it, see peer_mode).
  ucx::Endpoint connect(const bootstrap::Peer& peer);
  /// Takes `peers` as the table, with no endpoint yet but `kept`: the endpoint this rank
  /// joined with, to rank `kept_rank` (rank 0, or its node's leader), kept as that rank's.
  /// endpoint_to() works from here on; connect_endpoints() makes the rest.
  void take_table(std::vector<bootstrap::Peer> peers, ucx::Endpoint kept = {}, int kept_rank = 0);
  /// Connects to the higher ranks of the table this rank has no endpoint to yet (a late
  /// rank: to rank 0 only, the others on first use). Whoever passes the table on does so
  /// before this, so that the ranks waiting for it do not wait for its hundreds of endpoints.
  void connect_endpoints();
  /// take_table(peers, kept, kept_rank), then connect_endpoints().
  void connect_endpoints(std::vector<bootstrap::Peer> peers, ucx::Endpoint kept = {}, int kept_rank = 0);
  /// The endpoint to `peer`, connected on first use; nullptr when unreachable.
  ucp_ep_h endpoint_to(int peer);
  /// `peer` is a lower rank this rank has no endpoint to yet: it connects once the peer's
  /// first message has come. UCX then pairs the new endpoint with the peer's (the same
  /// connection) instead of opening a second one at the same moment: every pair of ranks
  /// connects once, from the lower. A storm of simultaneous pairs over tcp trips UCX 1.13's
  /// `tcp_cm.c:519` assertion (512 simulated nodes).
  bool connects_after_theirs(int peer) const;
  /// Calls `answer(peer)` for each of `lower` (lower ranks that connects_after_theirs) as soon
  /// as its message of collective `seq` has come, in the order they come, leaving the message
  /// to be taken; returns when all have been answered, or early (a failed peer, the deadline)
  /// for the caller's own receive to report. In rank order, a rank waited for the slowest
  /// lower rank before it made its endpoints to the others, one after the other.
  void answer_as_they_come(uint64_t seq, std::vector<int> lower, const std::function<void(int)>& answer,
                           Clock::time_point until);
  /// `peer`'s process was replaced by `process`, at `address` (on `node`, default: as
  /// before); a process of this host is watched (DeathNotices::watch).
  void replace_peer(int peer, std::span<const std::byte> address, std::optional<int> node = std::nullopt,
                    const ProcessIdentity& process = {});

  /// Seals `payload` for the process `destination` under tag `t`.
  std::vector<std::byte> seal(ucp_tag_t t, auth::ProcessId destination, std::span<const std::byte> payload,
                              uint64_t sequence = 0) const;
  /// Starts a tag send of `sealed` (kept alive by the caller until the wait) to `peer`
  /// (-1: not a rank yet) on `ep`; a dead peer ends in peer_died.
  ucx::Request start_send(int peer, ucp_ep_h ep, ucp_tag_t t, const std::vector<std::byte>& sealed,
                          const std::string& what);
  /// Waits (bounded by the timeout) for `request`; throws TimeoutError, or Error naming
  /// `what` (after peer_died's grace when `peer` failed).
  void wait(ucx::Request request, const std::string& what, int peer = -1);
  /// Takes one probed message out of UCX and returns it if it is at most `limit` payload
  /// bytes, sealed with this job's key for this process (or for `sealed_for`: a message this
  /// process carries on, node_leader.hpp) with the tag it was sent with, and accepted by
  /// `check`; otherwise refuses it (logged, dropped) and returns nullopt.
  std::optional<std::pair<std::vector<std::byte>, auth::Envelope>> accept_message(
      ucp_tag_message_h message, const ucp_tag_recv_info_t& info, std::size_t limit, const Check& check,
      std::optional<auth::ProcessId> sealed_for = std::nullopt);
  /// Receives the first acceptable message (accept_message) matching (t, mask) before
  /// `until`; refused ones do not end the wait. `from` (>= 0): the peer whose death ends it.
  std::pair<std::vector<std::byte>, auth::Envelope> recv_authentic(
      ucp_tag_t t, ucp_tag_t mask, std::size_t limit, const std::string& what, Clock::time_point until, int from,
      const Check& check, std::optional<auth::ProcessId> sealed_for = std::nullopt);
  /// The message exactly as its sender sealed it (the code is a function of the key, the
  /// envelope and the payload): what a rank carries on for another, after accept_message.
  std::vector<std::byte> sealed_again(const auth::Envelope& envelope, std::span<const std::byte> payload) const {
    return auth_->seal(envelope, payload);
  }
  /// Checks the code of a message that came inside another (a bundle's joins) and strips its
  /// trailer: its envelope, or nullopt when it is not sealed with this job's key.
  std::optional<auth::Envelope> open_carried(std::vector<std::byte>& sealed) const { return auth_->open(sealed); }

  /// `only`: the ranks that take part (the collective start); empty = every rank.
  std::vector<std::vector<std::byte>> allgatherv(std::span<const std::byte> mine, const std::vector<int>& only = {});
  void send(int peer, std::span<const std::byte> data, uint32_t user_tag);
  std::vector<std::byte> recv(int peer, uint32_t user_tag);

  /// The peer's process is known dead: its endpoint failed, or hyrun said so.
  bool is_failed(int peer) const;
  int known_ranks() const { return static_cast<int>(failed_.size()); }

 private:
  static void on_peer_failure(void* arg, ucp_ep_h ep, ucs_status_t status);
  bool peer_mode(int node) const;
  [[noreturn]] void peer_died(int peer, const std::string& what);
  /// Takes in what this worker's transports already hold (bounded: until they are idle).
  void drain();
  void refuse(ucp_tag_t t, std::size_t length, const std::string& why);
  /// Takes a message out of UCX without reading its payload.
  void discard(ucp_tag_message_h message);
  std::string check_source(int source, const auth::Envelope& envelope) const;

  RankEnvironment contract_;
  WorldOptions options_;
  std::chrono::milliseconds timeout_{};
  std::optional<auth::MessageAuth> auth_;  // once the job's token is known (a pending rank: after its message)
  bool shm_allowed_ = true;
  // Member order is teardown order in reverse: endpoints (closed by the destructor) before
  // the worker, the worker before the context.
  ucx::Context context_;
  ucx::Worker worker_;
  auth::ProcessId own_id_ = 0;
  std::string pending_dir_;                // HYRUN_ROOT_PENDING as the rank started
  std::vector<ucx::Endpoint> endpoints_;   // by rank, self included
  std::vector<bootstrap::Peer> table_;     // every rank's node and worker address, as last known
  std::vector<auth::ProcessId> ids_;       // by rank: the process id of table_[r].address
  std::set<auth::ProcessId> retired_ids_;  // processes that replace_peer replaced
  std::vector<ucs_status_t> failed_;       // by rank: the error its endpoint reported (UCS_OK: none)
  // Elastic programs: hyrun's word on deaths (local ranks at once, a lost node's ranks), so
  // that endpoints to this node's ranks can go without peer error handling and use shm.
  std::unique_ptr<DeathNotices> notices_;
  uint64_t collective_sequence_ = 0;
  // Point-to-point messages are numbered per (peer, user tag): a receiver accepts only
  // numbers above the last one it took from the same process, so a replay is refused.
  std::map<std::pair<int, uint32_t>, uint64_t> sent_sequence_;
  std::map<std::pair<int, uint32_t>, std::pair<auth::ProcessId, uint64_t>> received_sequence_;
  // Messages a rank sends to itself are queued here: a blocking send to oneself could
  // otherwise never complete (a large message waits for its matching receive).
  std::map<uint32_t, std::deque<std::vector<std::byte>>> self_messages_;
  int refused_count_ = 0;
};

}  // namespace hyrun
