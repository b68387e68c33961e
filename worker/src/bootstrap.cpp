#include "bootstrap.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "hyrun/common/env_contract.hpp"
#include "hyrun/common/hex.hpp"
#include "hyrun/ucx/worker.hpp"
#include "message_tag.hpp"
#include "node_leader.hpp"
#include "pending_environment.hpp"
#include "worker_log.hpp"

namespace hyrun::bootstrap {

namespace {

void publish(int fd, const std::string& line) {
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
std::vector<int> start_ranks(const RankEnvironment& contract) {
  if (!contract.start_ranks.empty()) return contract.start_ranks;
  std::vector<int> all(static_cast<std::size_t>(contract.world_size));
  for (int r = 0; r < contract.world_size; ++r) all[r] = r;
  return all;
}

// Who hands `rank` the address table at the start: rank 0 to the ranks of its own node and to
// the first start rank of every other node, which passes it on to the rest of its node. So
// rank 0 sends one copy a node, not one a rank (issue 39), and every rank can tell from the
// table itself whom its copy must come from.
int table_source(const std::vector<Peer>& table, const std::vector<int>& starting, int rank) {
  const int node = table[static_cast<std::size_t>(rank)].node;
  if (node == table[0].node) return 0;
  for (int r : starting)  // ascending
    if (table[static_cast<std::size_t>(r)].node == node) return r;
  return 0;
}

// Sends the sealed table to each of `ranks` and waits for every send.
void send_table(Communicator& comm, std::span<const std::byte> encoded, const std::vector<int>& ranks) {
  const auto t = tag::make(tag::Kind::kTable, 0, 0);
  std::vector<std::vector<std::byte>> sealed;
  std::vector<std::pair<int, ucx::Request>> sends;
  sealed.reserve(ranks.size());
  for (int r : ranks) {
    sealed.push_back(comm.seal(t, comm.id_of(r), encoded));
    sends.emplace_back(r, comm.start_send(r, comm.endpoint_to(r), t, sealed.back(), "sending the address table"));
  }
  for (auto& [r, request] : sends) comm.wait(std::move(request), "sending the address table", r);
}

std::vector<std::byte> own_address(const Communicator& comm) {
  const ucx::WorkerAddress own(comm.worker());
  return {own.bytes().begin(), own.bytes().end()};
}

// How a start rank joined rank 0: directly (through 0), through its node's leader, or as that
// leader (through itself), and the endpoint it joined on (to rank 0, or to its leader).
struct Joined {
  ucx::Endpoint endpoint;
  int through = 0;
};

// Sends this rank's join to rank 0: itself, or through its node's leader (node_leader.hpp),
// which carries its node's joins.
Joined join(Communicator& comm, const std::vector<std::byte>& root_address, const std::vector<std::byte>& own) {
  const auto& contract = comm.contract();
  const auto root_id = auth::process_id(root_address);
  const auto node = node_start_ranks(contract, !comm.pending_dir().empty());
  Joined joined{{}, node ? node->front() : 0};
  const bool leads = joined.through == contract.rank;
  if (leads) put_node_leader_address(comm.pending_dir(), contract.rank, own);
  // This endpoint stays the rank's endpoint to the rank it joined through. UCX pairs that
  // rank's endpoint to this rank with it (one connection per pair of workers), so closing it
  // and opening another would cancel its rendezvous sends to this rank ("Request canceled").
  joined.endpoint =
      joined.through == 0 || leads
          ? comm.connect({0, root_address, {}})
          : comm.connect({contract.node_rank,
                          await_node_leader_address(comm.pending_dir(), contract.rank, joined.through, comm.deadline()),
                          {}});
  const auto t = tag::make(tag::Kind::kJoin, contract.rank, tag::kOneJoin);
  auto sealed = comm.seal(t, root_id, encode({contract.rank, contract.node_rank, own, ProcessIdentity::own()}));
  if (leads) {
    carry_node_joins(comm, joined.endpoint.get(), root_id, *node, std::move(sealed));
  } else {
    const auto what = joined.through == 0 ? std::string("joining rank 0")
                                          : fmt::format("joining rank 0 through rank {}", joined.through);
    comm.wait(comm.start_send(-1, joined.endpoint.get(), t, sealed, what), what);
  }
  return joined;
}

}  // namespace

void start_root(Communicator& comm, JoinAdmission& admission) {
  const auto& contract = comm.contract();
  if (!contract.publish_fd)
    throw Error(fmt::format("rank 0 has no {}: hyrun gives it to rank 0 of jobs started with --bootstrap=ucx",
                            env::kPublishFd));
  const auto own = own_address(comm);
  publish(*contract.publish_fd, format_publish_line(to_hex(own)));

  std::vector<Peer> peers(contract.world_size);
  peers[0] = {contract.node_rank, own, ProcessIdentity::own()};
  const auto until = comm.deadline();
  const auto starting = start_ranks(contract);
  int joined = 1;
  while (joined < static_cast<int>(starting.size())) {
    auto join = admission.next(fmt::format("a join from {} more rank(s)", starting.size() - joined), until);
    if (!std::binary_search(starting.begin(), starting.end(), join.rank)) {
      // A late rank is admitted by accept_rejoins() once the World runs, never here.
      worker_log().warn("rank 0: refused a join of rank {} during the start: it is not one of {} ({})", join.rank,
                        env::kStartRanks, fmt::join(starting, ","));
      admission.withdraw(join.address);
      continue;
    }
    if (!peers[join.rank].address.empty()) {
      // Two processes with the job's token claim one rank: hyrun never starts two.
      throw Error(fmt::format("rank 0: two processes with this job's token joined as rank {}", join.rank));
    }
    peers[join.rank] = {join.node, std::move(join.address), join.process};
    ++joined;
  }
  worker_log().debug("rank 0: admitted {} joins in {} messages", joined - 1, admission.messages());
  // The table goes out first, on endpoints to its receivers alone; the rest are made after.
  comm.take_table(std::move(peers));
  const auto encoded = encode_table(comm.table());
  std::vector<int> to;
  for (int r : starting)
    if (r != 0 && (table_source(comm.table(), starting, r) == 0 || table_source(comm.table(), starting, r) == r))
      to.push_back(r);
  send_table(comm, encoded, to);
  worker_log().debug("rank 0: sent the address table ({} bytes) to {} of {} start ranks", encoded.size(), to.size(),
                     starting.size() - 1);
  comm.connect_endpoints();
}

void start_member(Communicator& comm) {
  const auto& contract = comm.contract();
  if (!contract.root_address_hex)
    throw Error(fmt::format("rank {} has no {}: hyrun sets it for ranks of jobs started with --bootstrap=ucx",
                            contract.rank, env::kRootAddress));
  const auto root_address = from_hex(*contract.root_address_hex, env::kRootAddress);
  const auto root_id = auth::process_id(root_address);
  const auto own = own_address(comm);
  auto joined = join(comm, root_address, own);
  // At the start, the copy comes from rank 0 or from the first start rank of this rank's node
  // (table_source); a rank that joins late gets it from rank 0 alone (admit_rejoins).
  const auto starting = start_ranks(contract);
  std::vector<Peer> peers;
  std::vector<std::byte> encoded;
  int source = 0;
  comm.recv_authentic(
      tag::make(tag::Kind::kTable, 0, 0), tag::kFullMask, max_table_bytes(contract.world_size), "the address table",
      comm.deadline(), -1, [&](const auth::Envelope& envelope, std::vector<std::byte>& bytes) -> std::string {
        try {
          peers = decode_table(bytes);
        } catch (const Error& e) {
          return e.what();
        }
        if (static_cast<int>(peers.size()) != contract.world_size) return "";  // said below
        source = contract.joins_late() ? 0 : table_source(peers, starting, contract.rank);
        const std::uint64_t want = source == 0 || source == contract.rank
                                       ? root_id
                                       : auth::process_id(peers[static_cast<std::size_t>(source)].address);
        if (envelope.source != want)
          return source == 0 || source == contract.rank ? "not sent by rank 0"
                                                        : fmt::format("not sent by rank {}", source);
        encoded = bytes;
        return "";
      });
  if (static_cast<int>(peers.size()) != contract.world_size)
    throw Error(fmt::format("rank {}: the address table from rank 0 has {} entries, expected {} ({})", contract.rank,
                            peers.size(), contract.world_size, env::kWorldSize));
  if (peers[contract.rank].address != own)
    throw Error(fmt::format("rank {}: the address table from rank 0 does not hold this process as rank {}",
                            contract.rank, contract.rank));
  comm.take_table(std::move(peers), std::move(joined.endpoint), joined.through == contract.rank ? 0 : joined.through);
  if (source == contract.rank) {
    // The first start rank of its node: the rest of the node's start ranks get the table from
    // it before it makes its endpoints to the rest of the job, not after them (16 testbed
    // nodes x 8 ranks: the hello's job end 0.93 of what it was, 2026-11-29).
    std::vector<int> to;
    for (int r : starting)
      if (r != contract.rank && table_source(comm.table(), starting, r) == contract.rank) to.push_back(r);
    send_table(comm, encoded, to);
    worker_log().debug("rank {}: passed the address table on to {} rank(s) of its node", contract.rank, to.size());
  }
  comm.connect_endpoints();
}

std::vector<World::Rejoin> admit_rejoins(Communicator& comm, JoinAdmission& admission) {
  std::vector<World::Rejoin> admitted;
  ucp_worker_progress(comm.worker());
  while (auto join = admission.poll()) {
    const int joined = join->rank;
    comm.replace_peer(joined, join->address, join->node, join->process);
    const auto t = tag::make(tag::Kind::kTable, 0, 0);
    const auto sealed = comm.seal(t, comm.id_of(joined), encode_table(comm.table()));
    const auto what = fmt::format("the address table for restarted rank {}", joined);
    comm.wait(comm.start_send(joined, comm.endpoint_to(joined), t, sealed, what), what, joined);
    admitted.push_back({joined, comm.table()[joined].address, comm.table()[joined].node, join->process.encode()});
  }
  return admitted;
}

}  // namespace hyrun::bootstrap
