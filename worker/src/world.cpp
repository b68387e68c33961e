#include "hyrun/worker.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <map>

#include "bootstrap_messages.hpp"
#include "hyrun/common/env_contract.hpp"
#include "hyrun/common/hex.hpp"
#include "message_tag.hpp"
#include "ucx_handles.hpp"
#include "worker_log.hpp"

namespace hyrun {

using Clock = std::chrono::steady_clock;

struct World::Impl {
  RankEnvironment contract;
  WorldOptions options;
  std::chrono::milliseconds timeout{};
  ucx::Context context;
  ucx::Worker worker;
  std::vector<ucx::Endpoint> endpoints;  // by rank, self included
  std::vector<std::vector<std::byte>> table;  // every rank's worker address, as last known
  std::vector<char> failed;                    // by rank: its endpoint reported an error
  uint64_t collective_sequence = 0;
  // Messages a rank sends to itself are queued here: a blocking send to oneself could
  // otherwise never complete (a large message waits for its matching receive).
  std::map<uint32_t, std::deque<std::vector<std::byte>>> self_messages;
  int failed_peer_count = 0;

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

  void wait(void* request, const std::string& what) {
    const ucs_status_t status = ucx::wait_request(worker.get(), request, deadline());
    if (status == UCS_ERR_TIMED_OUT)
      throw TimeoutError(fmt::format("rank {}: {} did not complete within {} ms", contract.rank, what, timeout.count()));
    ucx::check(status, fmt::format("rank {}: {}", contract.rank, what));
  }

  void send_tagged(ucp_ep_h ep, ucp_tag_t t, std::span<const std::byte> data, const std::string& what) {
    if (!ep) throw Error(fmt::format("rank {}: {}: the peer is unreachable", contract.rank, what));
    ucp_request_param_t param{};
    wait(ucp_tag_send_nbx(ep, data.data(), data.size(), t, &param), what);
  }

  void* start_send(ucp_ep_h ep, ucp_tag_t t, std::span<const std::byte> data) {
    if (!ep) throw Error(fmt::format("rank {}: a send to an unreachable peer", contract.rank));
    ucp_request_param_t param{};
    void* request = ucp_tag_send_nbx(ep, data.data(), data.size(), t, &param);
    if (UCS_PTR_IS_ERR(request)) ucx::check(UCS_PTR_STATUS(request), "starting a send");
    return request;
  }

  /// Receives one message whose tag matches (tag, mask); returns it and its sender tag.
  std::pair<std::vector<std::byte>, ucp_tag_t> recv_tagged(ucp_tag_t t, ucp_tag_t mask, const std::string& what,
                                                           Clock::time_point until) {
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h message = nullptr;
    unsigned spins = 0;
    ucx::Progress progress;
    while ((message = ucp_tag_probe_nb(worker.get(), t, mask, 1, &info)) == nullptr) {
      progress(worker.get());
      if (++spins % 256 == 0 && Clock::now() > until)
        throw TimeoutError(fmt::format("rank {}: {} did not arrive within {} ms", contract.rank, what, timeout.count()));
    }
    std::vector<std::byte> data(info.length);
    ucp_request_param_t param{};
    wait(ucp_tag_msg_recv_nbx(worker.get(), data.data(), data.size(), message, &param), what);
    return {std::move(data), info.sender_tag};
  }

  /// `to_root`: the endpoint this rank joined rank 0 with, kept as its endpoint to rank 0.
  void connect_endpoints(std::vector<std::vector<std::byte>> addresses, ucx::Endpoint to_root = {}) {
    table = std::move(addresses);
    failed.assign(table.size(), 0);
    endpoints.clear();
    endpoints.reserve(table.size());
    for (std::size_t r = 0; r < table.size(); ++r) {
      if (r == 0 && to_root.get()) {
        endpoints.push_back(std::move(to_root));
        continue;
      }
      if (contract.incarnation > 0 && r != 0) {  // a restarted rank connects when it needs a peer
        endpoints.emplace_back();
        continue;
      }
      try {
        endpoints.emplace_back(worker.get(), table[r], options.peer_error_handling, &Impl::on_peer_failure, this);
      } catch (const Error& e) {
        // A restarted rank may find ranks in the table that are gone: it marks them
        // failed instead of failing itself (at the collective start every rank is there).
        if (contract.incarnation == 0) throw;
        worker_log().info("rank {}: rank {} is unreachable ({}); marked failed", contract.rank, r, e.what());
        endpoints.emplace_back();
        failed[r] = 1;
      }
    }
  }

  void bootstrap_root(std::span<const std::byte> own_address) {
    if (!contract.publish_fd)
      throw Error(fmt::format("rank 0 has no {}: hyrun gives it to rank 0 of jobs started with --bootstrap=ucx",
                              env::kPublishFd));
    publish(*contract.publish_fd, format_publish_line(to_hex(own_address)));

    std::vector<std::vector<std::byte>> table(contract.world_size);
    table[0].assign(own_address.begin(), own_address.end());
    const auto until = deadline();
    int joined = 1;
    while (joined < contract.world_size) {
      auto [bytes, sender] = recv_tagged(tag::make(tag::Kind::kJoin, 0, 0), tag::kKindMask,
                                         fmt::format("a join from {} more rank(s)", contract.world_size - joined), until);
      bootstrap::JoinRequest join;
      try {
        join = bootstrap::decode_join(bytes);
      } catch (const Error& e) {
        worker_log().warn("rank 0: ignored a join: {}", e.what());
        continue;
      }
      if (join.job_token != contract.job_token) {
        worker_log().warn("rank 0: ignored a join claiming rank {} that did not present this job's token", join.rank);
        continue;
      }
      if (join.rank <= 0 || join.rank >= contract.world_size || !table[join.rank].empty())
        throw Error(fmt::format("rank 0: a join with this job's token claimed rank {}, which is {}", join.rank,
                                join.rank <= 0 || join.rank >= contract.world_size ? "outside the world" : "already joined"));
      table[join.rank] = std::move(join.address);
      ++joined;
    }
    connect_endpoints(std::move(table));
    const auto encoded = bootstrap::encode_table(this->table);
    std::vector<void*> sends;
    for (int r = 1; r < contract.world_size; ++r)
      sends.push_back(start_send(endpoints[r].get(), tag::make(tag::Kind::kTable, 0, 0), encoded));
    for (void* s : sends) wait(s, "sending the address table");
  }

  void bootstrap_member(std::span<const std::byte> own_address) {
    if (!contract.root_address_hex)
      throw Error(fmt::format("rank {} has no {}: hyrun sets it for ranks of jobs started with --bootstrap=ucx",
                              contract.rank, env::kRootAddress));
    const auto root_address = from_hex(*contract.root_address_hex, env::kRootAddress);
    // This endpoint stays the rank's endpoint to rank 0. UCX pairs rank 0's endpoint to
    // this rank with it (one connection per pair of workers), so closing it and opening
    // another would cancel rank 0's rendezvous sends to this rank ("Request canceled").
    ucx::Endpoint root(worker.get(), root_address, options.peer_error_handling, &Impl::on_peer_failure, this);
    const auto join = bootstrap::encode({contract.rank, contract.job_token, {own_address.begin(), own_address.end()}});
    send_tagged(root.get(), tag::make(tag::Kind::kJoin, contract.rank, 0), join, "joining rank 0");
    auto [bytes, sender] = recv_tagged(tag::make(tag::Kind::kTable, 0, 0), tag::kFullMask,
                                       "the address table from rank 0", deadline());
    auto table = bootstrap::decode_table(bytes);
    if (static_cast<int>(table.size()) != contract.world_size)
      throw Error(fmt::format("rank {}: the address table from rank 0 has {} entries, expected {} ({})", contract.rank,
                              table.size(), contract.world_size, env::kWorldSize));
    connect_endpoints(std::move(table), std::move(root));
  }

  /// Rank 0: admits one (re)join request if it is valid; returns its rank, or -1.
  int admit_rejoin(std::span<const std::byte> bytes) {
    bootstrap::JoinRequest join;
    try {
      join = bootstrap::decode_join(bytes);
    } catch (const Error& e) {
      worker_log().warn("rank 0: ignored a join: {}", e.what());
      return -1;
    }
    if (join.job_token != contract.job_token) {
      worker_log().warn("rank 0: ignored a join claiming rank {} that did not present this job's token", join.rank);
      return -1;
    }
    if (join.rank <= 0 || join.rank >= contract.world_size) {
      worker_log().warn("rank 0: ignored a join claiming rank {}, outside the world", join.rank);
      return -1;
    }
    replace_peer(join.rank, join.address);
    return join.rank;
  }

  /// The endpoint to `peer`, connected on first use (a restarted rank connects only to the
  /// ranks it talks to: others in its table may be gone); nullptr when unreachable.
  ucp_ep_h endpoint_to(int peer) {
    auto& ep = endpoints[peer];
    if (!ep.get() && !failed[peer] && !table[peer].empty()) {
      try {
        ep = ucx::Endpoint(worker.get(), table[peer], options.peer_error_handling, &Impl::on_peer_failure, this);
      } catch (const Error& e) {
        worker_log().info("rank {}: rank {} is unreachable ({}); marked failed", contract.rank, peer, e.what());
        failed[peer] = 1;
      }
    }
    return ep.get();
  }

  void replace_peer(int peer, std::span<const std::byte> address) {
    endpoints[peer].close(std::chrono::milliseconds(200), failed[peer] && options.peer_error_handling);
    endpoints[peer] = ucx::Endpoint(worker.get(), address, options.peer_error_handling, &Impl::on_peer_failure, this);
    table[peer].assign(address.begin(), address.end());
    failed[peer] = 0;
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

  std::vector<std::vector<std::byte>> allgatherv(std::span<const std::byte> mine) {
    const uint64_t seq = ++collective_sequence;
    const int n = contract.world_size;
    std::vector<void*> sends;
    for (int peer = 0; peer < n; ++peer)
      if (peer != contract.rank)
        sends.push_back(start_send(endpoint_to(peer), tag::make(tag::Kind::kCollective, contract.rank, seq), mine));
    std::vector<std::vector<std::byte>> all(n);
    all[contract.rank].assign(mine.begin(), mine.end());
    const auto until = deadline();
    for (int peer = 0; peer < n; ++peer)
      if (peer != contract.rank)
        all[peer] = recv_tagged(tag::make(tag::Kind::kCollective, peer, seq), tag::kFullMask,
                                fmt::format("collective #{} contribution from rank {}", seq, peer), until)
                        .first;
    for (void* s : sends) wait(s, fmt::format("collective #{} send", seq));
    return all;
  }
};

World::World(const WorldOptions& options) : impl_(std::make_unique<Impl>()) {
  auto& s = *impl_;
  s.contract = RankEnvironment::from_environment();
  s.options = options;
  s.timeout = options.timeout.value_or(std::chrono::milliseconds(s.contract.bootstrap_timeout_ms));
  if (s.contract.world_size > tag::kMaxRanks)
    throw Error(fmt::format("{}={} exceeds the worker library's limit of {} ranks", env::kWorldSize,
                            s.contract.world_size, tag::kMaxRanks));
  s.context = ucx::make_context(options.extra_ucp_features);
  s.worker = ucx::make_worker(s.context.get());
  const ucx::WorkerAddress own(s.worker.get());
  if (s.contract.incarnation > 0) {
    // A restarted rank: the others are past the collective start; rank 0 admits it with
    // accept_rejoins() and sends the current table.
    s.bootstrap_member(own.bytes());
  } else {
    if (s.contract.rank == 0)
      s.bootstrap_root(own.bytes());
    else
      s.bootstrap_member(own.bytes());
    barrier();
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
  impl_->send_tagged(impl_->endpoint_to(peer), tag::make(tag::Kind::kPointToPoint, rank(), user_tag), data,
                     fmt::format("send of {} bytes to rank {}", data.size(), peer));
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
  return impl_
      ->recv_tagged(tag::make(tag::Kind::kPointToPoint, peer, user_tag), tag::kFullMask,
                    fmt::format("a message from rank {} (tag {})", peer, user_tag), impl_->deadline())
      .first;
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
    std::vector<std::byte> bytes(info.length);
    ucp_request_param_t param{};
    s.wait(ucp_tag_msg_recv_nbx(s.worker.get(), bytes.data(), bytes.size(), message, &param), "a rejoin request");
    const int joined = s.admit_rejoin(bytes);
    if (joined < 0) continue;
    s.send_tagged(s.endpoints[joined].get(), tag::make(tag::Kind::kTable, 0, 0), bootstrap::encode_table(s.table),
                  fmt::format("the address table for restarted rank {}", joined));
    admitted.push_back({joined, s.table[joined]});
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
    if (impl_->failed[r]) out.push_back(static_cast<int>(r));
  return out;
}

bool World::peer_failed(int peer) const {
  return peer >= 0 && static_cast<std::size_t>(peer) < impl_->failed.size() && impl_->failed[peer];
}

ucp_context_h World::ucp_context() const { return impl_->context.get(); }
ucp_worker_h World::ucp_worker() const { return impl_->worker.get(); }
ucp_ep_h World::endpoint(int peer) const {
  if (peer < 0 || peer >= size()) throw Error(fmt::format("endpoint: {} is outside the world of {} ranks", peer, size()));
  return impl_->endpoint_to(peer);
}
void World::wait(void* request, const std::string& what) { impl_->wait(request, what); }

}  // namespace hyrun
