#include "hyrun/worker.hpp"

#include <fmt/format.h>

#include "bootstrap.hpp"
#include "communicator.hpp"
#include "hyrun/common/process_identity.hpp"
#include "hyrun/ucx/worker.hpp"
#include "join_admission.hpp"
#include "launcher_hello.hpp"
#include "worker_log.hpp"

namespace hyrun {

struct World::Impl {
  Impl(RankEnvironment contract, const WorldOptions& options) : comm(std::move(contract), options), admission(comm) {}
  Communicator comm;
  JoinAdmission admission;  // rank 0 only: the joins it admits
};

World::World(const WorldOptions& options) {
  detail::say_hello_to_launcher();  // done at load already, unless the library's initialisers were skipped
  impl_ = std::make_unique<Impl>(RankEnvironment::from_environment(), options);
  auto& comm = impl_->comm;
  const auto& contract = comm.contract();
  if (contract.joins_late()) {
    // A restarted or late rank: the others are past the collective start; rank 0 admits
    // it with accept_rejoins() and sends the current table.
    bootstrap::start_member(comm);
  } else {
    if (contract.rank == 0)
      bootstrap::start_root(comm, impl_->admission);
    else
      bootstrap::start_member(comm);
    comm.allgatherv({}, contract.start_ranks);  // the start's barrier: the ranks present
  }
  worker_log().debug("rank {}: connected to {} ranks", contract.rank, contract.world_size);
}

World::~World() = default;
World::World(World&&) noexcept = default;
World& World::operator=(World&&) noexcept = default;

int World::rank() const { return impl_->comm.contract().rank; }
int World::size() const { return impl_->comm.contract().world_size; }
int World::local_rank() const { return impl_->comm.contract().local_rank; }
int World::local_size() const { return impl_->comm.contract().local_world_size; }
int World::node_rank() const { return impl_->comm.contract().node_rank; }
int World::num_nodes() const { return impl_->comm.contract().num_nodes; }
std::chrono::milliseconds World::timeout() const { return impl_->comm.timeout(); }

void World::barrier() { impl_->comm.allgatherv({}); }

std::vector<std::vector<std::byte>> World::allgatherv(std::span<const std::byte> mine) {
  return impl_->comm.allgatherv(mine);
}

std::vector<std::byte> World::allgather(std::span<const std::byte> mine) {
  auto all = impl_->comm.allgatherv(mine);
  std::vector<std::byte> out;
  out.reserve(mine.size() * all.size());
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r].size() != mine.size())
      throw Error(
          fmt::format("allgather: rank {} contributed {} bytes, rank {} contributed {}; use allgatherv for "
                      "contributions of different sizes",
                      r, all[r].size(), rank(), mine.size()));
    out.insert(out.end(), all[r].begin(), all[r].end());
  }
  return out;
}

void World::send(int peer, std::span<const std::byte> data, uint32_t user_tag) {
  if (peer < 0 || peer >= size())
    throw Error(fmt::format("send: peer {} is outside the world of {} ranks", peer, size()));
  impl_->comm.send(peer, data, user_tag);
}

std::vector<std::byte> World::recv(int peer, uint32_t user_tag) {
  if (peer < 0 || peer >= size())
    throw Error(fmt::format("recv: peer {} is outside the world of {} ranks", peer, size()));
  return impl_->comm.recv(peer, user_tag);
}

int World::incarnation() const { return impl_->comm.contract().incarnation; }

std::vector<std::byte> World::own_address() const {
  const ucx::WorkerAddress own(impl_->comm.worker());
  return {own.bytes().begin(), own.bytes().end()};
}

std::vector<World::Rejoin> World::accept_rejoins() {
  if (rank() != 0)
    throw Error(fmt::format("accept_rejoins: only rank 0 admits restarted ranks, this is rank {}", rank()));
  return bootstrap::admit_rejoins(impl_->comm, impl_->admission);
}

void World::replace_peer(int peer, std::span<const std::byte> address, std::optional<int> node,
                         std::span<const std::byte> process) {
  if (peer < 0 || peer >= size() || peer == rank())
    throw Error(fmt::format("replace_peer: {} is not another rank of the world of {}", peer, size()));
  ProcessIdentity identity;
  try {
    identity = ProcessIdentity::decode(process);
  } catch (const Error& e) {
    throw Error(fmt::format("replace_peer: rank {}'s process: {}", peer, e.what()));
  }
  impl_->comm.replace_peer(peer, address, node, identity);
}

std::vector<int> World::failed_peers() const {
  std::vector<int> out;
  for (int r = 0; r < impl_->comm.known_ranks(); ++r)
    if (impl_->comm.is_failed(r)) out.push_back(r);
  return out;
}

bool World::peer_failed(int peer) const {
  return peer >= 0 && peer < impl_->comm.known_ranks() && impl_->comm.is_failed(peer);
}

ucp_context_h World::ucp_context() const { return impl_->comm.context(); }
ucp_worker_h World::ucp_worker() const { return impl_->comm.worker(); }
ucp_ep_h World::endpoint(int peer) const {
  if (peer < 0 || peer >= size())
    throw Error(fmt::format("endpoint: {} is outside the world of {} ranks", peer, size()));
  return impl_->comm.endpoint_to(peer);
}

}  // namespace hyrun
