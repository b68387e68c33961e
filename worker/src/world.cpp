#include "hyrun/worker.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "bootstrap_messages.hpp"
#include "death_notices.hpp"
#include "hyrun/common/env_contract.hpp"
#include "hyrun/common/hex.hpp"
#include "launcher_hello.hpp"
#include "message_auth.hpp"
#include "message_tag.hpp"
#include "ucx_handles.hpp"
#include "worker_log.hpp"

namespace hyrun {

using Clock = std::chrono::steady_clock;

namespace {

/// A rank that saw a peer die waits this long (at most its timeout) before failing on its
/// own: hyrun stops every rank of the job on the first failure, across nodes through the
/// PMIx server, and the job should name the rank that died, not the ones that noticed.
constexpr std::chrono::seconds kPeerFailureSettle{5};
/// Refused messages logged as warnings; later ones are only counted (a flood must not
/// turn into a flood of log lines).
constexpr int kLoggedRefusals = 100;

/// The statuses a request to a peer ends with when the peer or the way to it is gone.
bool is_peer_error(ucs_status_t status) {
  return status == UCS_ERR_ENDPOINT_TIMEOUT || status == UCS_ERR_CONNECTION_RESET || status == UCS_ERR_UNREACHABLE ||
         status == UCS_ERR_NOT_CONNECTED || status == UCS_ERR_REJECTED;
}

const char* kind_name(ucp_tag_t t) {
  switch (static_cast<tag::Kind>(t >> 60)) {
    case tag::Kind::kJoin: return "join";
    case tag::Kind::kTable: return "address table";
    case tag::Kind::kPointToPoint: return "point-to-point";
    case tag::Kind::kCollective: return "collective";
  }
  return "unknown";
}

}  // namespace

struct World::Impl {
  RankEnvironment contract;
  WorldOptions options;
  std::chrono::milliseconds timeout{};
  ucx::Context context;
  ucx::Worker worker;
  std::optional<auth::MessageAuth> auth;
  auth::ProcessId own_id = 0;
  bool shm_allowed = true;
  std::vector<ucx::Endpoint> endpoints;       // by rank, self included
  std::vector<bootstrap::Peer> table;         // every rank's node and worker address, as last known
  std::vector<auth::ProcessId> ids;           // by rank: the process id of table[r].address
  std::set<auth::ProcessId> retired_ids;      // processes that replace_peer replaced
  std::vector<char> failed;                   // by rank: its endpoint reported an error
  // Elastic programs: hyrun's word on deaths (local ranks at once, a lost node's ranks), so
  // that endpoints to this node's ranks can go without peer error handling and use shm.
  std::unique_ptr<DeathNotices> notices;
  uint64_t collective_sequence = 0;
  // Point-to-point messages are numbered per (peer, user tag): a receiver accepts only
  // numbers above the last one it took from the same process, so a replay is refused.
  std::map<std::pair<int, uint32_t>, uint64_t> sent_sequence;
  std::map<std::pair<int, uint32_t>, std::pair<auth::ProcessId, uint64_t>> received_sequence;
  std::set<std::vector<std::byte>> admitted_addresses;  // rank 0: every address it admitted
  // Messages a rank sends to itself are queued here: a blocking send to oneself could
  // otherwise never complete (a large message waits for its matching receive).
  std::map<uint32_t, std::deque<std::vector<std::byte>>> self_messages;
  int failed_peer_count = 0;
  int refused_count = 0;

  Clock::time_point deadline() const { return Clock::now() + timeout; }

  static void on_peer_failure(void* arg, ucp_ep_h ep, ucs_status_t status) {
    auto* self = static_cast<Impl*>(arg);
    ++self->failed_peer_count;
    for (std::size_t r = 0; r < self->endpoints.size(); ++r)
      if (self->endpoints[r].get() == ep) {
        self->failed[r] = 1;
        worker_log().info("rank {}: the endpoint to rank {} failed: {}", self->contract.rank, r,
                          ucs_status_string(status));
        return;
      }
    worker_log().debug("rank {}: an endpoint failed: {}", self->contract.rank, ucs_status_string(status));
  }

  /// Peer error handling on every endpoint that could see the peer die: with it, UCX
  /// reports a dead peer to on_peer_failure; without it, UCX aborts the process on the
  /// first transport error ("Fatal: unexpected error"). Endpoints to ranks of the same
  /// node may go without it when shared memory is allowed (UCX 1.13 would give it up):
  /// their deaths are then told by hyrun (elastic programs) or end the job (others).
  bool peer_mode(int node) const {
    return node != contract.node_rank || !shm_allowed || (options.peer_error_handling && !notices);
  }

  /// The peer's process is known dead: its endpoint failed, or hyrun said so.
  bool is_failed(int peer) const {
    return failed[static_cast<std::size_t>(peer)] || (notices && notices->dead(peer));
  }

  ucx::Endpoint connect(const bootstrap::Peer& peer) {
    return ucx::Endpoint(worker.get(), peer.address, peer_mode(peer.node), &Impl::on_peer_failure, this);
  }

  /// A peer this rank needs has failed. Programs without peer error handling do not expect
  /// it: give hyrun the time to stop this rank for the peer's failure before failing alone.
  [[noreturn]] void peer_died(int peer, const std::string& what) {
    const std::string message =
        fmt::format("rank {}: {}: rank {} failed (its endpoint reported an error)", contract.rank, what, peer);
    if (!options.peer_error_handling) {
      worker_log().info("{}; waiting up to {} s to be stopped for it", message, kPeerFailureSettle.count());
      const auto until = Clock::now() + std::min<std::chrono::milliseconds>(timeout, kPeerFailureSettle);
      ucx::Progress progress;
      while (Clock::now() < until) progress(worker.get());
    }
    throw Error(message);
  }

  void wait(void* request, const std::string& what, int peer = -1) {
    const bool known_peer = peer >= 0 && static_cast<std::size_t>(peer) < failed.size();
    // An endpoint without peer error handling never fails: hyrun's notice ends the wait.
    const ucs_status_t status = ucx::wait_request(worker.get(), request, deadline(), [&] { return known_peer && is_failed(peer); });
    if (status == UCS_ERR_TIMED_OUT)
      throw TimeoutError(fmt::format("rank {}: {} did not complete within {} ms", contract.rank, what, timeout.count()));
    if (status != UCS_OK && known_peer && (is_failed(peer) || is_peer_error(status))) {
      failed[peer] = 1;  // the request may complete with the error before the handler runs
      peer_died(peer, what);
    }
    ucx::check(status, fmt::format("rank {}: {}", contract.rank, what));
  }

  void* start_send(int peer, ucp_ep_h ep, ucp_tag_t t, const std::vector<std::byte>& sealed, const std::string& what) {
    if (!ep) {
      if (peer >= 0 && is_failed(peer)) peer_died(peer, what);
      throw Error(fmt::format("rank {}: {}: the peer is unreachable", contract.rank, what));
    }
    ucp_request_param_t param{};
    void* request = ucp_tag_send_nbx(ep, sealed.data(), sealed.size(), t, &param);
    if (UCS_PTR_IS_ERR(request)) {
      if (peer >= 0 && (is_failed(peer) || is_peer_error(UCS_PTR_STATUS(request)))) {
        failed[peer] = 1;
        peer_died(peer, what);
      }
      ucx::check(UCS_PTR_STATUS(request), fmt::format("rank {}: {}", contract.rank, what));
    }
    return request;
  }

  std::vector<std::byte> seal(ucp_tag_t t, auth::ProcessId destination, std::span<const std::byte> payload,
                              uint64_t sequence = 0) const {
    return auth->seal({t, own_id, destination, sequence}, payload);
  }

  void refuse(ucp_tag_t t, std::size_t length, const std::string& why) {
    ++refused_count;
    const auto line = fmt::format("rank {}: refused a {} message claiming rank {} ({} bytes): {}", contract.rank,
                                  kind_name(t), tag::source_of(t), length, why);
    if (refused_count <= kLoggedRefusals)
      worker_log().warn("{}{}", line,
                        refused_count == kLoggedRefusals ? " (further refusals are logged at debug level only)" : "");
    else
      worker_log().debug("{}", line);
  }

  /// Takes a message out of UCX without reading its payload (it is larger than allowed).
  void discard(ucp_tag_message_h message) {
    std::byte sink[1];
    ucp_request_param_t param{};
    // A receive buffer smaller than the message ends in UCS_ERR_MESSAGE_TRUNCATED: UCX
    // completes the sender's side without transferring the payload.
    const ucs_status_t status =
        ucx::wait_request(worker.get(), ucp_tag_msg_recv_nbx(worker.get(), sink, 0, message, &param),
                          Clock::now() + std::chrono::seconds(1));
    if (status != UCS_OK && status != UCS_ERR_MESSAGE_TRUNCATED)
      worker_log().debug("rank {}: discarding a message: {}", contract.rank, ucs_status_string(status));
  }

  /// What recv_authentic checks beyond the code: returns "" to accept, or why it refuses.
  using Check = std::function<std::string(const auth::Envelope&, std::vector<std::byte>&)>;

  /// Takes one probed message out of UCX and returns it if it is at most `limit` payload
  /// bytes, sealed with this job's key for this process with the tag it was sent with,
  /// and accepted by `check`; otherwise refuses it (logged, dropped) and returns nullopt.
  std::optional<std::pair<std::vector<std::byte>, auth::Envelope>> accept_message(ucp_tag_message_h message,
                                                                                  const ucp_tag_recv_info_t& info,
                                                                                  std::size_t limit,
                                                                                  const Check& check) {
    if (info.length > limit + auth::kTrailerBytes) {
      refuse(info.sender_tag, info.length, fmt::format("larger than the {} bytes allowed, not read", limit));
      discard(message);
      return std::nullopt;
    }
    std::vector<std::byte> data(info.length);
    ucp_request_param_t param{};
    // Not yet authenticated: a transfer that fails (its sender vanished, or stalls) is the
    // sender's problem, refused like any other bad message, never this rank's error.
    const ucs_status_t status = ucx::wait_request(
        worker.get(), ucp_tag_msg_recv_nbx(worker.get(), data.data(), data.size(), message, &param), deadline());
    if (status != UCS_OK) {
      refuse(info.sender_tag, info.length, fmt::format("its payload could not be received: {}", ucs_status_string(status)));
      return std::nullopt;
    }
    const auto envelope = auth->open(data);
    if (!envelope) {
      refuse(info.sender_tag, info.length, "not sealed with this job's key (the sender lacks the job token)");
      return std::nullopt;
    }
    if (envelope->tag != info.sender_tag || envelope->destination != own_id) {
      refuse(info.sender_tag, info.length, "sealed for another tag or process (a replay)");
      return std::nullopt;
    }
    if (const auto why = check(*envelope, data); !why.empty()) {
      refuse(info.sender_tag, info.length, why);
      return std::nullopt;
    }
    return std::pair{std::move(data), *envelope};
  }

  /// Receives the first acceptable message (accept_message) matching (t, mask); refused
  /// ones do not end the wait. `from` (>= 0): the peer whose death ends it (peer_died).
  std::pair<std::vector<std::byte>, auth::Envelope> recv_authentic(ucp_tag_t t, ucp_tag_t mask, std::size_t limit,
                                                                   const std::string& what, Clock::time_point until,
                                                                   int from, const Check& check) {
    for (;;) {
      ucp_tag_recv_info_t info{};
      ucp_tag_message_h message = nullptr;
      unsigned spins = 0;
      ucx::Progress progress;
      while ((message = ucp_tag_probe_nb(worker.get(), t, mask, 1, &info)) == nullptr) {
        progress(worker.get());
        if (++spins % 256 == 0) {
          if (from >= 0 && is_failed(from)) peer_died(from, fmt::format("waiting for {}", what));
          if (Clock::now() > until)
            throw TimeoutError(fmt::format("rank {}: {} did not arrive within {} ms", contract.rank, what, timeout.count()));
        }
      }
      if (auto accepted = accept_message(message, info, limit, check)) return std::move(*accepted);
    }
  }

  /// Checks that a message from rank `source` comes from the process this rank knows as
  /// `source`, or from a new process of that rank (restarted, not yet announced here).
  std::string check_source(int source, const auth::Envelope& envelope) const {
    if (source < 0 || static_cast<std::size_t>(source) >= ids.size()) return "no such rank";
    if (envelope.source == ids[source]) return "";
    if (retired_ids.contains(envelope.source)) return "sent by an earlier process of that rank (a replay)";
    // A rank may come back as a new process only in jobs that handle peer failures.
    if (!options.peer_error_handling && !contract.joins_late()) return "sent by a process that is not that rank";
    return "";
  }

  /// `to_root`: the endpoint this rank joined rank 0 with, kept as its endpoint to rank 0.
  void connect_endpoints(std::vector<bootstrap::Peer> peers, ucx::Endpoint to_root = {}) {
    table = std::move(peers);
    ids.clear();
    for (const auto& p : table) ids.push_back(p.address.empty() ? 0 : auth::process_id(p.address));
    failed.assign(table.size(), 0);
    endpoints.clear();
    endpoints.reserve(table.size());
    for (std::size_t r = 0; r < table.size(); ++r) {
      if (r == 0 && to_root.get()) {
        endpoints.push_back(std::move(to_root));
        continue;
      }
      // A late rank connects when it needs a peer; a rank not started yet has no address.
      if ((contract.joins_late() && r != 0) || table[r].address.empty()) {
        endpoints.emplace_back();
        continue;
      }
      try {
        endpoints.push_back(connect(table[r]));
      } catch (const Error& e) {
        // A restarted rank may find ranks in the table that are gone: it marks them
        // failed instead of failing itself (at the collective start every rank is there).
        if (!contract.joins_late()) throw;
        worker_log().info("rank {}: rank {} is unreachable ({}); marked failed", contract.rank, r, e.what());
        endpoints.emplace_back();
        failed[r] = 1;
      }
    }
  }

  /// Rank 0: decodes and checks a join sealed for it; returns it, or an empty optional after
  /// logging why it was refused.
  std::optional<bootstrap::JoinRequest> check_join(const auth::Envelope& envelope, std::span<const std::byte> bytes,
                                                   ucp_tag_t t, std::string& why) {
    bootstrap::JoinRequest join;
    try {
      join = bootstrap::decode_join(bytes);
    } catch (const Error& e) {
      why = e.what();
      return std::nullopt;
    }
    if (join.rank <= 0 || join.rank >= contract.world_size) {
      why = fmt::format("rank {} is outside the world of {}", join.rank, contract.world_size);
      return std::nullopt;
    }
    if (join.rank != tag::source_of(t)) {
      why = fmt::format("the tag names rank {}, the join rank {}", tag::source_of(t), join.rank);
      return std::nullopt;
    }
    if (envelope.source != auth::process_id(join.address)) {
      why = "sealed by another process than the one whose address it carries";
      return std::nullopt;
    }
    if (admitted_addresses.contains(join.address)) {
      why = fmt::format("rank {} with this address was already admitted (a replay)", join.rank);
      return std::nullopt;
    }
    return join;
  }

  /// A Check for joins: decodes the join into `join` and checks it (check_join).
  Check join_check(std::optional<bootstrap::JoinRequest>& join) {
    return [this, &join](const auth::Envelope& envelope, std::vector<std::byte>& bytes) {
      std::string why;
      join = check_join(envelope, bytes, envelope.tag, why);
      return why;
    };
  }

  /// Receives the next authentic join (a wrong token, a malformed or replayed join is
  /// refused and logged, never fatal: anyone on the network can send one).
  bootstrap::JoinRequest recv_join(const std::string& what, Clock::time_point until) {
    std::optional<bootstrap::JoinRequest> join;
    recv_authentic(tag::make(tag::Kind::kJoin, 0, 0), tag::kKindMask, bootstrap::kMaxJoinBytes, what, until, -1,
                   join_check(join));
    admitted_addresses.insert(join->address);
    return std::move(*join);
  }

  void bootstrap_root(std::span<const std::byte> own_address) {
    if (!contract.publish_fd)
      throw Error(fmt::format("rank 0 has no {}: hyrun gives it to rank 0 of jobs started with --bootstrap=ucx",
                              env::kPublishFd));
    publish(*contract.publish_fd, format_publish_line(to_hex(own_address)));

    std::vector<bootstrap::Peer> peers(contract.world_size);
    peers[0] = {contract.node_rank, {own_address.begin(), own_address.end()}};
    const auto until = deadline();
    const auto starting = start_ranks();
    int joined = 1;
    while (joined < static_cast<int>(starting.size())) {
      auto join = recv_join(fmt::format("a join from {} more rank(s)", starting.size() - joined), until);
      if (!std::binary_search(starting.begin(), starting.end(), join.rank)) {
        // A late rank is admitted by accept_rejoins() once the World runs, never here.
        worker_log().warn("rank 0: refused a join of rank {} during the start: it is not one of {} ({})", join.rank,
                          env::kStartRanks, fmt::join(starting, ","));
        admitted_addresses.erase(join.address);
        continue;
      }
      if (!peers[join.rank].address.empty()) {
        // Two processes with the job's token claim one rank: hyrun never starts two.
        throw Error(fmt::format("rank 0: two processes with this job's token joined as rank {}", join.rank));
      }
      peers[join.rank] = {join.node, std::move(join.address)};
      ++joined;
    }
    connect_endpoints(std::move(peers));
    const auto encoded = bootstrap::encode_table(table);
    std::vector<std::vector<std::byte>> sealed;
    std::vector<void*> sends;
    sealed.reserve(contract.world_size);
    for (int r : starting) {
      if (r == 0) continue;
      const auto t = tag::make(tag::Kind::kTable, 0, 0);
      sealed.push_back(seal(t, ids[r], encoded));
      sends.push_back(start_send(r, endpoints[r].get(), t, sealed.back(), "sending the address table"));
    }
    for (std::size_t i = 0; i < sends.size(); ++i) wait(sends[i], "sending the address table", starting[i + 1]);
  }

  void bootstrap_member(std::span<const std::byte> own_address) {
    if (!contract.root_address_hex)
      throw Error(fmt::format("rank {} has no {}: hyrun sets it for ranks of jobs started with --bootstrap=ucx",
                              contract.rank, env::kRootAddress));
    const auto root_address = from_hex(*contract.root_address_hex, env::kRootAddress);
    const auto root_id = auth::process_id(root_address);
    // This endpoint stays the rank's endpoint to rank 0. UCX pairs rank 0's endpoint to
    // this rank with it (one connection per pair of workers), so closing it and opening
    // another would cancel rank 0's rendezvous sends to this rank ("Request canceled").
    ucx::Endpoint root = connect({0, root_address});
    const auto join_tag = tag::make(tag::Kind::kJoin, contract.rank, 0);
    const auto join = seal(join_tag, root_id,
                           bootstrap::encode({contract.rank, contract.node_rank, {own_address.begin(), own_address.end()}}));
    wait(start_send(-1, root.get(), join_tag, join, "joining rank 0"), "joining rank 0");
    std::vector<bootstrap::Peer> peers;
    recv_authentic(tag::make(tag::Kind::kTable, 0, 0), tag::kFullMask, bootstrap::max_table_bytes(contract.world_size),
                   "the address table from rank 0", deadline(), -1,
                   [&](const auth::Envelope& envelope, std::vector<std::byte>& bytes) -> std::string {
                     if (envelope.source != root_id) return "not sent by rank 0";
                     try {
                       peers = bootstrap::decode_table(bytes);
                     } catch (const Error& e) {
                       return e.what();
                     }
                     return "";
                   });
    if (static_cast<int>(peers.size()) != contract.world_size)
      throw Error(fmt::format("rank {}: the address table from rank 0 has {} entries, expected {} ({})", contract.rank,
                              peers.size(), contract.world_size, env::kWorldSize));
    if (peers[contract.rank].address != std::vector<std::byte>(own_address.begin(), own_address.end()))
      throw Error(fmt::format("rank {}: the address table from rank 0 does not hold this process as rank {}",
                              contract.rank, contract.rank));
    connect_endpoints(std::move(peers), std::move(root));
  }

  /// The endpoint to `peer`, connected on first use (a restarted rank connects only to the
  /// ranks it talks to: others in its table may be gone); nullptr when unreachable.
  ucp_ep_h endpoint_to(int peer) {
    auto& ep = endpoints[peer];
    if (!ep.get() && !is_failed(peer) && !table[peer].address.empty()) {
      try {
        ep = connect(table[peer]);
      } catch (const Error& e) {
        worker_log().info("rank {}: rank {} is unreachable ({}); marked failed", contract.rank, peer, e.what());
        failed[peer] = 1;
      }
    }
    return ep.get();
  }

  void replace_peer(int peer, std::span<const std::byte> address, std::optional<int> node = std::nullopt) {
    endpoints[peer].close(std::chrono::milliseconds(200), is_failed(peer) && peer_mode(table[peer].node));
    if (notices) notices->forget(peer);  // before the new endpoint: no older notice can mark it
    const bootstrap::Peer replacement{node.value_or(table[peer].node), {address.begin(), address.end()}};
    endpoints[peer] = connect(replacement);
    if (ids[peer] != 0) retired_ids.insert(ids[peer]);
    table[peer] = replacement;
    ids[peer] = auth::process_id(address);
    failed[peer] = 0;
    // A new process: numbering starts again in both directions.
    std::erase_if(sent_sequence, [peer](const auto& entry) { return entry.first.first == peer; });
    std::erase_if(received_sequence, [peer](const auto& entry) { return entry.first.first == peer; });
  }

  static void publish(int fd, const std::string& line) {
    std::size_t written = 0;
    while (written < line.size()) {
      const ssize_t n = ::write(fd, line.data() + written, line.size() - written);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw SystemError(fmt::format("rank 0: publishing the root address on fd {} ({})", fd, env::kPublishFd), errno);
      }
      written += static_cast<std::size_t>(n);
    }
    ::close(fd);
  }

  /// The ranks of the collective start (HYRUN_START_RANKS), ascending.
  std::vector<int> start_ranks() const {
    if (!contract.start_ranks.empty()) return contract.start_ranks;
    std::vector<int> all(static_cast<std::size_t>(contract.world_size));
    for (int r = 0; r < contract.world_size; ++r) all[r] = r;
    return all;
  }

  /// `only`: the ranks that take part (the collective start); empty = every rank.
  std::vector<std::vector<std::byte>> allgatherv(std::span<const std::byte> mine, const std::vector<int>& only = {}) {
    const uint64_t seq = ++collective_sequence;
    const int n = contract.world_size;
    const std::string what = fmt::format("collective #{}", seq);
    const auto takes_part = [&only](int peer) { return only.empty() || std::binary_search(only.begin(), only.end(), peer); };
    std::vector<std::vector<std::byte>> sealed(n);
    std::vector<std::pair<int, void*>> sends;
    for (int peer = 0; peer < n; ++peer)
      if (peer != contract.rank && takes_part(peer)) {
        const auto t = tag::make(tag::Kind::kCollective, contract.rank, seq);
        ucp_ep_h ep = endpoint_to(peer);
        sealed[peer] = seal(t, ids[peer], mine);
        sends.emplace_back(peer, start_send(peer, ep, t, sealed[peer], what + fmt::format(" send to rank {}", peer)));
      }
    std::vector<std::vector<std::byte>> all(n);
    all[contract.rank].assign(mine.begin(), mine.end());
    const auto until = deadline();
    for (int peer = 0; peer < n; ++peer)
      if (peer != contract.rank && takes_part(peer))
        all[peer] = recv_authentic(tag::make(tag::Kind::kCollective, peer, seq), tag::kFullMask, options.max_message_bytes,
                                   fmt::format("{} contribution from rank {}", what, peer), until, peer,
                                   [&](const auth::Envelope& envelope, std::vector<std::byte>&) {
                                     return check_source(peer, envelope);
                                   })
                        .first;
    for (const auto& [peer, request] : sends) wait(request, what + fmt::format(" send to rank {}", peer), peer);
    return all;
  }

  void send(int peer, std::span<const std::byte> data, uint32_t user_tag) {
    const std::string what = fmt::format("send of {} bytes to rank {}", data.size(), peer);
    if (data.size() > options.max_message_bytes)
      throw Error(fmt::format("rank {}: {}: larger than WorldOptions::max_message_bytes ({})", contract.rank, what,
                              options.max_message_bytes));
    const auto t = tag::make(tag::Kind::kPointToPoint, contract.rank, user_tag);
    ucp_ep_h ep = endpoint_to(peer);
    const auto sealed = seal(t, ids[peer], data, ++sent_sequence[{peer, user_tag}]);
    wait(start_send(peer, ep, t, sealed, what), what, peer);
  }

  std::vector<std::byte> recv(int peer, uint32_t user_tag) {
    auto [payload, envelope] = recv_authentic(
        tag::make(tag::Kind::kPointToPoint, peer, user_tag), tag::kFullMask, options.max_message_bytes,
        fmt::format("a message from rank {} (tag {})", peer, user_tag), deadline(), peer,
        [&](const auth::Envelope& e, std::vector<std::byte>&) -> std::string {
          if (auto why = check_source(peer, e); !why.empty()) return why;
          const auto it = received_sequence.find({peer, user_tag});
          if (it != received_sequence.end() && it->second.first == e.source && e.sequence <= it->second.second)
            return fmt::format("message number {} was already received (a replay)", e.sequence);
          return "";
        });
    received_sequence[{peer, user_tag}] = {envelope.source, envelope.sequence};
    return std::move(payload);
  }
};

World::World(const WorldOptions& options) : impl_(std::make_unique<Impl>()) {
  detail::say_hello_to_launcher();  // done at load already, unless the library's initialisers were skipped
  auto& s = *impl_;
  s.contract = RankEnvironment::from_environment();
  s.options = options;
  s.timeout = options.timeout.value_or(std::chrono::milliseconds(s.contract.bootstrap_timeout_ms));
  if (s.contract.world_size > tag::kMaxRanks)
    throw Error(fmt::format("{}={} exceeds the worker library's limit of {} ranks", env::kWorldSize,
                            s.contract.world_size, tag::kMaxRanks));
  s.auth.emplace(s.contract.job_token);
  s.shm_allowed = ucx::shared_memory_allowed();
  // Before any endpoint exists: whether local ones need peer error handling depends on it.
  if (options.peer_error_handling && s.contract.control_fd) {
    try {
      s.notices = std::make_unique<DeathNotices>(*s.contract.control_fd, s.contract.world_size, s.contract.rank);
    } catch (const SystemError& e) {  // e.g. a wrapper closed the fd: UCX then reports every death
      worker_log().warn("{}; every endpoint uses UCX peer error handling instead (no shared memory)", e.what());
    }
  }
  // A job on one node needs no network: UCX then listens on the loopback interface only
  // (shared memory does the rest), not on every interface of the machine.
  s.context = ucx::make_context(options.extra_ucp_features, s.contract.num_nodes == 1 ? "lo" : nullptr);
  s.worker = ucx::make_worker(s.context.get());
  const ucx::WorkerAddress own(s.worker.get());
  s.own_id = auth::process_id(own.bytes());
  if (s.contract.joins_late()) {
    // A restarted or late rank: the others are past the collective start; rank 0 admits
    // it with accept_rejoins() and sends the current table.
    s.bootstrap_member(own.bytes());
  } else {
    if (s.contract.rank == 0)
      s.bootstrap_root(own.bytes());
    else
      s.bootstrap_member(own.bytes());
    s.allgatherv({}, s.contract.start_ranks);  // the start's barrier: the ranks present
  }
  worker_log().debug("rank {}: connected to {} ranks", s.contract.rank, s.contract.world_size);
}

World::~World() {
  if (!impl_) return;
  // Close every endpoint under one short deadline (a peer that already exited must not
  // cost a timeout per endpoint); the worker and context go after (member order).
  std::vector<void*> closing;
  for (auto& ep : impl_->endpoints) closing.push_back(ep.start_close());
  const auto until = Clock::now() + std::chrono::seconds(2);
  for (void* request : closing) ucx::wait_request(impl_->worker.get(), request, until);
  impl_->endpoints.clear();
  // Messages nobody received (anyone can send some) are dropped here, not left to UCX's
  // warnings at worker destruction.
  ucp_tag_recv_info_t info{};
  int dropped = 0;
  while (ucp_tag_message_h message = ucp_tag_probe_nb(impl_->worker.get(), 0, 0, 1, &info)) {
    impl_->discard(message);
    ++dropped;
  }
  if (dropped > 0) worker_log().debug("rank {}: dropped {} messages that were never received", rank(), dropped);
}
World::World(World&&) noexcept = default;
World& World::operator=(World&&) noexcept = default;

int World::rank() const { return impl_->contract.rank; }
int World::size() const { return impl_->contract.world_size; }
int World::local_rank() const { return impl_->contract.local_rank; }
int World::local_size() const { return impl_->contract.local_world_size; }
int World::node_rank() const { return impl_->contract.node_rank; }
int World::num_nodes() const { return impl_->contract.num_nodes; }
std::chrono::milliseconds World::timeout() const { return impl_->timeout; }

void World::barrier() { impl_->allgatherv({}); }

std::vector<std::vector<std::byte>> World::allgatherv(std::span<const std::byte> mine) {
  return impl_->allgatherv(mine);
}

std::vector<std::byte> World::allgather(std::span<const std::byte> mine) {
  auto all = impl_->allgatherv(mine);
  std::vector<std::byte> out;
  out.reserve(mine.size() * all.size());
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r].size() != mine.size())
      throw Error(fmt::format("allgather: rank {} contributed {} bytes, rank {} contributed {}; use allgatherv for "
                              "contributions of different sizes",
                              r, all[r].size(), rank(), mine.size()));
    out.insert(out.end(), all[r].begin(), all[r].end());
  }
  return out;
}

void World::send(int peer, std::span<const std::byte> data, uint32_t user_tag) {
  if (peer < 0 || peer >= size()) throw Error(fmt::format("send: peer {} is outside the world of {} ranks", peer, size()));
  if (peer == rank()) {
    impl_->self_messages[user_tag].emplace_back(data.begin(), data.end());
    return;
  }
  impl_->send(peer, data, user_tag);
}

std::vector<std::byte> World::recv(int peer, uint32_t user_tag) {
  if (peer < 0 || peer >= size()) throw Error(fmt::format("recv: peer {} is outside the world of {} ranks", peer, size()));
  if (peer == rank()) {
    auto& queue = impl_->self_messages[user_tag];
    if (queue.empty())
      throw Error(fmt::format("recv: rank {} waits for a message from itself (tag {}) that it never sent", peer, user_tag));
    auto message = std::move(queue.front());
    queue.pop_front();
    return message;
  }
  return impl_->recv(peer, user_tag);
}

int World::incarnation() const { return impl_->contract.incarnation; }

std::vector<std::byte> World::own_address() const {
  const ucx::WorkerAddress own(impl_->worker.get());
  return {own.bytes().begin(), own.bytes().end()};
}

std::vector<World::Rejoin> World::accept_rejoins() {
  if (rank() != 0) throw Error(fmt::format("accept_rejoins: only rank 0 admits restarted ranks, this is rank {}", rank()));
  auto& s = *impl_;
  std::vector<Rejoin> admitted;
  ucp_worker_progress(s.worker.get());
  for (;;) {
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h message = ucp_tag_probe_nb(s.worker.get(), tag::make(tag::Kind::kJoin, 0, 0), tag::kKindMask, 1, &info);
    if (!message) break;
    std::optional<bootstrap::JoinRequest> join;
    if (!s.accept_message(message, info, bootstrap::kMaxJoinBytes, s.join_check(join))) continue;
    const int joined = join->rank;
    s.admitted_addresses.insert(join->address);
    s.replace_peer(joined, join->address, join->node);
    const auto t = tag::make(tag::Kind::kTable, 0, 0);
    const auto sealed = s.seal(t, s.ids[joined], bootstrap::encode_table(s.table));
    const auto what = fmt::format("the address table for restarted rank {}", joined);
    s.wait(s.start_send(joined, s.endpoints[joined].get(), t, sealed, what), what, joined);
    admitted.push_back({joined, s.table[joined].address});
  }
  return admitted;
}

void World::replace_peer(int peer, std::span<const std::byte> address) {
  if (peer < 0 || peer >= size() || peer == rank())
    throw Error(fmt::format("replace_peer: {} is not another rank of the world of {}", peer, size()));
  impl_->replace_peer(peer, address);
}

std::vector<int> World::failed_peers() const {
  std::vector<int> out;
  for (std::size_t r = 0; r < impl_->failed.size(); ++r)
    if (impl_->is_failed(static_cast<int>(r))) out.push_back(static_cast<int>(r));
  return out;
}

bool World::peer_failed(int peer) const {
  return peer >= 0 && static_cast<std::size_t>(peer) < impl_->failed.size() && impl_->is_failed(peer);
}

ucp_context_h World::ucp_context() const { return impl_->context.get(); }
ucp_worker_h World::ucp_worker() const { return impl_->worker.get(); }
ucp_ep_h World::endpoint(int peer) const {
  if (peer < 0 || peer >= size()) throw Error(fmt::format("endpoint: {} is outside the world of {} ranks", peer, size()));
  return impl_->endpoint_to(peer);
}
void World::wait(void* request, const std::string& what) { impl_->wait(request, what); }

}  // namespace hyrun
