#include "communicator.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "hyrun/ucx/check.hpp"
#include "hyrun/ucx/progress.hpp"
#include "message_tag.hpp"
#include "pending_environment.hpp"
#include "worker_log.hpp"

namespace hyrun {

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

Communicator::Communicator(RankEnvironment contract, const WorldOptions& options)
    : contract_(std::move(contract)),
      options_(options),
      timeout_(options.timeout.value_or(std::chrono::milliseconds(contract_.bootstrap_timeout_ms))),
      shm_allowed_(ucx::shared_memory_allowed()) {
  if (contract_.world_size > tag::kMaxRanks)
    throw Error(fmt::format("{}={} exceeds the worker library's limit of {} ranks", env::kWorldSize,
                            contract_.world_size, tag::kMaxRanks));
  // Before any endpoint exists: whether local ones need peer error handling depends on it.
  // Before UCX opens descriptors too: a wrapper that closed the control fd must not make
  // one of UCX's take its number.
  if (options.peer_error_handling && contract_.control_fd) {
    try {
      notices_ = std::make_unique<DeathNotices>(*contract_.control_fd, contract_.world_size, contract_.rank);
    } catch (const SystemError& e) {  // e.g. a wrapper closed the fd: UCX then reports every death
      worker_log().warn("{}; every endpoint uses UCX peer error handling instead (no shared memory)", e.what());
    }
  }
  // A job on one node needs no network: UCX then listens on the loopback interface only
  // (shared memory does the rest), not on every interface of the machine.
  context_ = ucx::make_context(options.extra_ucp_features, contract_.num_nodes == 1 ? "lo" : nullptr);
  worker_ = ucx::make_worker(context_.get());
  // A rank started before the exchange set up UCX meanwhile; now it needs rank 0's address
  // (and on another node the job's token).
  pending_dir_ = contract_.root_pending_dir;
  contract_ = receive_pending_environment(contract_, deadline());
  auth_.emplace(contract_.job_token);
  if (notices_) notices_->wake_on_notice(worker_.get());  // a waiter blocked on its events notices the death
  own_id_ = auth::process_id(ucx::WorkerAddress(worker_.get()).bytes());
}

Communicator::~Communicator() {
  // Close every endpoint under one short deadline (a peer that already exited must not
  // cost a timeout per endpoint); the worker and context go after (member order).
  std::vector<ucx::Request> closing;
  for (auto& ep : endpoints_) closing.push_back(ep.start_close());
  const auto until = Clock::now() + std::chrono::seconds(2);
  for (auto& request : closing) request.wait_or_cancel(worker_.get(), until);
  endpoints_.clear();
  // Messages nobody received (anyone can send some) are dropped here, not left to UCX's
  // warnings at worker destruction.
  ucp_tag_recv_info_t info{};
  int dropped = 0;
  while (ucp_tag_message_h message = ucp_tag_probe_nb(worker_.get(), 0, 0, 1, &info)) {
    discard(message);
    ++dropped;
  }
  if (dropped > 0) worker_log().debug("rank {}: dropped {} messages that were never received", contract_.rank, dropped);
}

void Communicator::on_peer_failure(void* arg, ucp_ep_h ep, ucs_status_t status) {
  auto* self = static_cast<Communicator*>(arg);
  for (std::size_t r = 0; r < self->endpoints_.size(); ++r)
    if (self->endpoints_[r].get() == ep) {
      self->failed_[r] = status == UCS_OK ? UCS_ERR_IO_ERROR : status;
      worker_log().info("rank {}: the endpoint to rank {} failed: {}", self->contract_.rank, r,
                        ucs_status_string(status));
      return;
    }
  worker_log().debug("rank {}: an endpoint failed: {}", self->contract_.rank, ucs_status_string(status));
}

/// Peer error handling on every endpoint that could see the peer die: with it, UCX
/// reports a dead peer to on_peer_failure; without it, UCX aborts the process on the
/// first transport error ("Fatal: unexpected error"). Endpoints to ranks of the same
/// node may go without it when shared memory is allowed (UCX 1.13 would give it up):
/// their deaths are then told by hyrun (elastic programs) or end the job (others).
bool Communicator::peer_mode(int node) const {
  return node != contract_.node_rank || !shm_allowed_ || (options_.peer_error_handling && !notices_);
}

bool Communicator::is_failed(int peer) const {
  return failed_[static_cast<std::size_t>(peer)] != UCS_OK || (notices_ && notices_->dead(peer));
}

ucx::Endpoint Communicator::connect(const bootstrap::Peer& peer) {
  return ucx::Endpoint(worker_.get(), peer.address, peer_mode(peer.node), &Communicator::on_peer_failure, this);
}

/// A peer this rank needs has failed. Programs without peer error handling do not expect
/// it: give hyrun the time to stop this rank for the peer's failure before failing alone.
void Communicator::peer_died(int peer, const std::string& what) {
  // Which of the two ways the death was learnt: the endpoint's error, or the end of the
  // process (told by hyrun, or watched on this host).
  const ucs_status_t status = failed_[static_cast<std::size_t>(peer)];
  const std::string message =
      fmt::format("rank {}: {}: rank {} failed ({})", contract_.rank, what, peer,
                  status != UCS_OK ? fmt::format("its endpoint reported an error: {}", ucs_status_string(status))
                                   : std::string("its process ended"));
  if (!options_.peer_error_handling) {
    worker_log().info("{}; waiting up to {} s to be stopped for it", message, kPeerFailureSettle.count());
    const auto until = Clock::now() + std::min<std::chrono::milliseconds>(timeout_, kPeerFailureSettle);
    ucx::Progress progress;
    while (Clock::now() < until) progress(worker_.get());
  }
  throw Error(message);
}

void Communicator::drain() {
  constexpr int kIdlePolls = 4, kMostPolls = 100000;
  for (int idle = 0, polls = 0; idle < kIdlePolls && polls < kMostPolls; ++polls)
    idle = ucp_worker_progress(worker_.get()) != 0 ? 0 : idle + 1;
}

void Communicator::wait(ucx::Request request, const std::string& what, int peer) {
  const bool known_peer = peer >= 0 && static_cast<std::size_t>(peer) < failed_.size();
  // An endpoint without peer error handling never fails: hyrun's notice ends the wait.
  const ucs_status_t status =
      request.wait_or_cancel(worker_.get(), deadline(), [&] { return known_peer && is_failed(peer); });
  if (status == UCS_ERR_TIMED_OUT)
    throw TimeoutError(
        fmt::format("rank {}: {} did not complete within {} ms", contract_.rank, what, timeout_.count()));
  if (status != UCS_OK && known_peer && (is_failed(peer) || is_peer_error(status))) {
    // The request may end with the endpoint's error before the handler runs.
    if (failed_[peer] == UCS_OK && is_peer_error(status)) failed_[peer] = status;
    peer_died(peer, what);
  }
  ucx::check(status, fmt::format("rank {}: {}", contract_.rank, what));
}

ucx::Request Communicator::start_send(int peer, ucp_ep_h ep, ucp_tag_t t, const std::vector<std::byte>& sealed,
                                      const std::string& what) {
  if (!ep) {
    if (peer >= 0 && is_failed(peer)) peer_died(peer, what);
    throw Error(fmt::format("rank {}: {}: the peer is unreachable", contract_.rank, what));
  }
  ucp_request_param_t param{};
  ucx::Request request(ucp_tag_send_nbx(ep, sealed.data(), sealed.size(), t, &param));
  if (const ucs_status_t status = request.status(); status != UCS_OK && status != UCS_INPROGRESS) {
    if (peer >= 0 && (is_failed(peer) || is_peer_error(status))) {
      if (failed_[peer] == UCS_OK && is_peer_error(status)) failed_[peer] = status;
      peer_died(peer, what);
    }
    ucx::check(status, fmt::format("rank {}: {}", contract_.rank, what));
  }
  return request;
}

std::vector<std::byte> Communicator::seal(ucp_tag_t t, auth::ProcessId destination, std::span<const std::byte> payload,
                                          uint64_t sequence) const {
  return auth_->seal({t, own_id_, destination, sequence}, payload);
}

void Communicator::refuse(ucp_tag_t t, std::size_t length, const std::string& why) {
  ++refused_count_;
  const auto line = fmt::format("rank {}: refused a {} message claiming rank {} ({} bytes): {}", contract_.rank,
                                kind_name(t), tag::source_of(t), length, why);
  if (refused_count_ <= kLoggedRefusals)
    worker_log().warn("{}{}", line,
                      refused_count_ == kLoggedRefusals ? " (further refusals are logged at debug level only)" : "");
  else
    worker_log().debug("{}", line);
}

void Communicator::discard(ucp_tag_message_h message) {
  std::byte sink[1];
  ucp_request_param_t param{};
  // A receive buffer smaller than the message ends in UCS_ERR_MESSAGE_TRUNCATED: UCX
  // completes the sender's side without transferring the payload.
  const ucs_status_t status = ucx::Request(ucp_tag_msg_recv_nbx(worker_.get(), sink, 0, message, &param))
                                  .wait_or_cancel(worker_.get(), Clock::now() + std::chrono::seconds(1));
  if (status != UCS_OK && status != UCS_ERR_MESSAGE_TRUNCATED)
    worker_log().debug("rank {}: discarding a message: {}", contract_.rank, ucs_status_string(status));
}

std::optional<std::pair<std::vector<std::byte>, auth::Envelope>> Communicator::accept_message(
    ucp_tag_message_h message, const ucp_tag_recv_info_t& info, std::size_t limit, const Check& check,
    std::optional<auth::ProcessId> sealed_for) {
  if (info.length > limit + auth::kTrailerBytes) {
    refuse(info.sender_tag, info.length, fmt::format("larger than the {} bytes allowed, not read", limit));
    discard(message);
    return std::nullopt;
  }
  std::vector<std::byte> data(info.length);
  ucp_request_param_t param{};
  // Not yet authenticated: a transfer that fails (its sender vanished, or stalls) is the
  // sender's problem, refused like any other bad message, never this rank's error.
  const ucs_status_t status =
      ucx::Request(ucp_tag_msg_recv_nbx(worker_.get(), data.data(), data.size(), message, &param))
          .wait_or_cancel(worker_.get(), deadline());
  if (status != UCS_OK) {
    refuse(info.sender_tag, info.length,
           fmt::format("its payload could not be received: {}", ucs_status_string(status)));
    return std::nullopt;
  }
  const auto envelope = auth_->open(data);
  if (!envelope) {
    refuse(info.sender_tag, info.length, "not sealed with this job's key (the sender lacks the job token)");
    return std::nullopt;
  }
  if (envelope->tag != info.sender_tag || envelope->destination != sealed_for.value_or(own_id_)) {
    refuse(info.sender_tag, info.length, "sealed for another tag or process (a replay)");
    return std::nullopt;
  }
  if (const auto why = check(*envelope, data); !why.empty()) {
    refuse(info.sender_tag, info.length, why);
    return std::nullopt;
  }
  return std::pair{std::move(data), *envelope};
}

std::pair<std::vector<std::byte>, auth::Envelope> Communicator::recv_authentic(
    ucp_tag_t t, ucp_tag_t mask, std::size_t limit, const std::string& what, Clock::time_point until, int from,
    const Check& check, std::optional<auth::ProcessId> sealed_for) {
  for (;;) {
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h message = nullptr;
    unsigned spins = 0;
    ucx::Progress progress;
    while ((message = ucp_tag_probe_nb(worker_.get(), t, mask, 1, &info)) == nullptr) {
      // Blocks once idle: a message, a failed endpoint or a death notice wakes it.
      const bool blocked = progress.wait_for_event(worker_.get(), until);
      if (++spins % 256 == 0 || blocked) {
        if (from >= 0 && is_failed(from)) {
          // The end of its process can be known before what it sent just before is taken
          // in (a wait woken by both): that message is not lost to its death.
          drain();
          if ((message = ucp_tag_probe_nb(worker_.get(), t, mask, 1, &info)) != nullptr) break;
          peer_died(from, fmt::format("waiting for {}", what));
        }
        if (Clock::now() > until)
          throw TimeoutError(
              fmt::format("rank {}: {} did not arrive within {} ms", contract_.rank, what, timeout_.count()));
      }
    }
    if (auto accepted = accept_message(message, info, limit, check, sealed_for)) return std::move(*accepted);
  }
}

/// Checks that a message from rank `source` comes from the process this rank knows as
/// `source`, or from a new process of that rank (restarted, not yet announced here).
std::string Communicator::check_source(int source, const auth::Envelope& envelope) const {
  if (source < 0 || static_cast<std::size_t>(source) >= ids_.size()) return "no such rank";
  if (envelope.source == ids_[source]) return "";
  if (retired_ids_.contains(envelope.source)) return "sent by an earlier process of that rank (a replay)";
  // A rank may come back as a new process only in jobs that handle peer failures.
  if (!options_.peer_error_handling && !contract_.joins_late()) return "sent by a process that is not that rank";
  return "";
}

void Communicator::connect_endpoints(std::vector<bootstrap::Peer> peers, ucx::Endpoint kept, int kept_rank) {
  take_table(std::move(peers), std::move(kept), kept_rank);
  connect_endpoints();
}

void Communicator::take_table(std::vector<bootstrap::Peer> peers, ucx::Endpoint kept, int kept_rank) {
  table_ = std::move(peers);
  if (notices_)
    for (std::size_t r = 0; r < table_.size(); ++r) notices_->watch(static_cast<int>(r), table_[r].process);
  ids_.clear();
  for (const auto& p : table_) ids_.push_back(p.address.empty() ? 0 : auth::process_id(p.address));
  failed_.assign(table_.size(), UCS_OK);
  endpoints_.clear();
  endpoints_.resize(table_.size());
  if (kept.get() && static_cast<std::size_t>(kept_rank) < table_.size())
    endpoints_[static_cast<std::size_t>(kept_rank)] = std::move(kept);
}

void Communicator::connect_endpoints() {
  for (std::size_t r = 0; r < table_.size(); ++r) {
    // A late rank connects when it needs a peer; a rank not started yet has no address. The
    // endpoint to a lower rank is made once that rank's first message has come
    // (connects_after_theirs).
    if (endpoints_[r].get() || (contract_.joins_late() && r != 0) || table_[r].address.empty() ||
        connects_after_theirs(static_cast<int>(r)))
      continue;
    try {
      endpoints_[r] = connect(table_[r]);
    } catch (const Error& e) {
      // A restarted rank may find ranks in the table that are gone: it marks them
      // failed instead of failing itself (at the collective start every rank is there).
      if (!contract_.joins_late()) throw;
      worker_log().info("rank {}: rank {} is unreachable ({}); marked failed", contract_.rank, r, e.what());
      failed_[r] = UCS_ERR_UNREACHABLE;
    }
  }
}

bool Communicator::connects_after_theirs(int peer) const {
  return peer < contract_.rank && !endpoints_[static_cast<std::size_t>(peer)].get() && !is_failed(peer) &&
         !table_[static_cast<std::size_t>(peer)].address.empty();
}

ucp_ep_h Communicator::endpoint_to(int peer) {
  // A restarted rank connects only to the ranks it talks to: others in its table may be gone.
  auto& ep = endpoints_[peer];
  if (!ep.get() && !is_failed(peer) && !table_[peer].address.empty()) {
    try {
      ep = connect(table_[peer]);
    } catch (const Error& e) {
      worker_log().info("rank {}: rank {} is unreachable ({}); marked failed", contract_.rank, peer, e.what());
      failed_[peer] = UCS_ERR_UNREACHABLE;
    }
  }
  return ep.get();
}

void Communicator::replace_peer(int peer, std::span<const std::byte> address, std::optional<int> node,
                                const ProcessIdentity& process) {
  endpoints_[peer].close(std::chrono::milliseconds(200), is_failed(peer) && peer_mode(table_[peer].node));
  if (notices_) {
    notices_->forget(peer);  // before the new endpoint: no older notice can mark it
    notices_->watch(peer, process);
  }
  const bootstrap::Peer replacement{node.value_or(table_[peer].node), {address.begin(), address.end()}, process};
  endpoints_[peer] = connect(replacement);
  if (ids_[peer] != 0) retired_ids_.insert(ids_[peer]);
  table_[peer] = replacement;
  ids_[peer] = auth::process_id(address);
  failed_[peer] = UCS_OK;
  // A new process: numbering starts again in both directions.
  std::erase_if(sent_sequence_, [peer](const auto& entry) { return entry.first.first == peer; });
  std::erase_if(received_sequence_, [peer](const auto& entry) { return entry.first.first == peer; });
}

std::vector<std::vector<std::byte>> Communicator::allgatherv(std::span<const std::byte> mine,
                                                             const std::vector<int>& only) {
  const uint64_t seq = ++collective_sequence_;
  const int n = contract_.world_size;
  const std::string what = fmt::format("collective #{}", seq);
  const auto takes_part = [&only](int peer) {
    return only.empty() || std::binary_search(only.begin(), only.end(), peer);
  };
  std::vector<std::vector<std::byte>> sealed(n);
  std::vector<std::pair<int, ucx::Request>> sends;
  const auto t = tag::make(tag::Kind::kCollective, contract_.rank, seq);
  const auto send_to = [&](int peer) {
    ucp_ep_h ep = endpoint_to(peer);
    sealed[peer] = seal(t, ids_[peer], mine);
    sends.emplace_back(peer, start_send(peer, ep, t, sealed[peer], what + fmt::format(" send to rank {}", peer)));
  };
  std::vector<bool> after_theirs(n);
  std::vector<int> lower;
  for (int peer = 0; peer < n; ++peer)
    if (peer != contract_.rank && takes_part(peer)) {
      if (connects_after_theirs(peer)) {
        after_theirs[peer] = true;
        lower.push_back(peer);
      } else {
        send_to(peer);
      }
    }
  const auto until = deadline();
  answer_as_they_come(
      seq, std::move(lower),
      [&](int peer) {
        send_to(peer);
        after_theirs[peer] = false;
      },
      until);
  std::vector<std::vector<std::byte>> all(n);
  all[contract_.rank].assign(mine.begin(), mine.end());
  for (int peer = 0; peer < n; ++peer)
    if (peer != contract_.rank && takes_part(peer)) {
      all[peer] =
          recv_authentic(
              tag::make(tag::Kind::kCollective, peer, seq), tag::kFullMask, options_.max_message_bytes,
              fmt::format("{} contribution from rank {}", what, peer), until, peer,
              [&](const auth::Envelope& envelope, std::vector<std::byte>&) { return check_source(peer, envelope); })
              .first;
      if (after_theirs[peer]) send_to(peer);  // UCX now pairs the new endpoint with the peer's
    }
  for (auto& [peer, request] : sends) wait(std::move(request), what + fmt::format(" send to rank {}", peer), peer);
  return all;
}

void Communicator::answer_as_they_come(uint64_t seq, std::vector<int> lower, const std::function<void(int)>& answer,
                                       Clock::time_point until) {
  // A message's arrival only says when to make the endpoint to the table's address of its
  // tag's rank; what it holds is authenticated when the caller takes it.
  ucx::Progress progress;
  while (!lower.empty()) {
    const auto came = std::partition(lower.begin(), lower.end(), [&](int peer) {
      ucp_tag_recv_info_t info{};
      return ucp_tag_probe_nb(worker_.get(), tag::make(tag::Kind::kCollective, peer, seq), tag::kFullMask, 0, &info) ==
             nullptr;
    });
    for (auto it = came; it != lower.end(); ++it) answer(*it);
    lower.erase(came, lower.end());
    if (lower.empty() || Clock::now() > until ||
        std::any_of(lower.begin(), lower.end(), [this](int peer) { return is_failed(peer); }))
      return;
    progress.wait_for_event(worker_.get(), until);
  }
}

void Communicator::send(int peer, std::span<const std::byte> data, uint32_t user_tag) {
  if (peer == contract_.rank) {
    self_messages_[user_tag].emplace_back(data.begin(), data.end());
    return;
  }
  const std::string what = fmt::format("send of {} bytes to rank {}", data.size(), peer);
  if (data.size() > options_.max_message_bytes)
    throw Error(fmt::format("rank {}: {}: larger than WorldOptions::max_message_bytes ({})", contract_.rank, what,
                            options_.max_message_bytes));
  const auto t = tag::make(tag::Kind::kPointToPoint, contract_.rank, user_tag);
  ucp_ep_h ep = endpoint_to(peer);
  const auto sealed = seal(t, ids_[peer], data, ++sent_sequence_[{peer, user_tag}]);
  wait(start_send(peer, ep, t, sealed, what), what, peer);
}

std::vector<std::byte> Communicator::recv(int peer, uint32_t user_tag) {
  if (peer == contract_.rank) {
    auto& queue = self_messages_[user_tag];
    if (queue.empty())
      throw Error(
          fmt::format("recv: rank {} waits for a message from itself (tag {:#x}) that it never sent", peer, user_tag));
    auto message = std::move(queue.front());
    queue.pop_front();
    return message;
  }
  auto [payload, envelope] = recv_authentic(
      tag::make(tag::Kind::kPointToPoint, peer, user_tag), tag::kFullMask, options_.max_message_bytes,
      fmt::format("a message from rank {} (tag {:#x})", peer, user_tag), deadline(), peer,
      [&](const auth::Envelope& e, std::vector<std::byte>&) -> std::string {
        if (auto why = check_source(peer, e); !why.empty()) return why;
        const auto it = received_sequence_.find({peer, user_tag});
        if (it != received_sequence_.end() && it->second.first == e.source && e.sequence <= it->second.second)
          return fmt::format("message number {} was already received (a replay)", e.sequence);
        return "";
      });
  received_sequence_[{peer, user_tag}] = {envelope.source, envelope.sequence};
  return std::move(payload);
}

}  // namespace hyrun
