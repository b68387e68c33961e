#include "node_leader.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "bootstrap_messages.hpp"
#include "hyrun/common/error.hpp"
#include "join_admission.hpp"
#include "message_tag.hpp"
#include "worker_log.hpp"

namespace hyrun::bootstrap {

std::optional<std::vector<int>> node_start_ranks(const RankEnvironment& contract, bool pending) {
  if (!pending || contract.joins_late()) return std::nullopt;
  const int first = contract.rank - contract.local_rank;
  if (first == 0) return std::nullopt;  // rank 0's node: its ranks join rank 0 directly
  const auto& starting = contract.start_ranks;
  std::vector<int> ranks;
  for (int r = first; r < std::min(first + contract.local_world_size, contract.world_size); ++r)
    if (starting.empty() || std::binary_search(starting.begin(), starting.end(), r)) ranks.push_back(r);
  if (ranks.size() < 2) return std::nullopt;  // a bundle of one saves nothing
  return ranks;
}

int carry_node_joins(Communicator& comm, ucp_ep_h root, auth::ProcessId root_id, const std::vector<int>& node_ranks,
                     std::vector<std::byte> own) {
  const auto& contract = comm.contract();
  std::vector<std::vector<std::byte>> joins;
  joins.push_back(std::move(own));
  std::set<int> waiting(node_ranks.begin(), node_ranks.end());
  waiting.erase(contract.rank);
  const auto until = comm.deadline();
  // Each join is checked as rank 0 will check it, and once: rank 0 refuses a whole bundle
  // for one bad join, so a replay or a stranger's message must not get into one.
  const auto check = [&](const auth::Envelope& envelope, std::vector<std::byte>& bytes) -> std::string {
    const int rank = tag::source_of(envelope.tag);
    if (tag::payload_of(envelope.tag) != tag::kOneJoin) return "a bundle of joins goes to rank 0 only";
    if (!waiting.contains(rank))
      return fmt::format("rank {} is not a start rank of this node that has still to join", rank);
    JoinRequest join;
    if (auto why = check_join(envelope, bytes, contract.world_size, join); !why.empty()) return why;
    if (join.node != contract.node_rank)
      return fmt::format("rank {} joins as a rank of node {}, not of this node ({})", rank, join.node,
                         contract.node_rank);
    return "";
  };
  while (!waiting.empty()) {
    const auto what = fmt::format("the join of rank(s) {} of its node", fmt::join(waiting, ","));
    auto [payload, envelope] = comm.recv_authentic(tag::make(tag::Kind::kJoin, 0, 0), tag::kKindMask, kMaxJoinBytes,
                                                   what, until, -1, check, root_id);
    waiting.erase(tag::source_of(envelope.tag));
    joins.push_back(comm.sealed_again(envelope, payload));
  }
  const auto t = tag::make(tag::Kind::kJoin, contract.rank, tag::kJoinBundle);
  const auto sealed = comm.seal(t, root_id, encode_bundle(joins));
  comm.wait(comm.start_send(-1, root, t, sealed, "carrying its node's joins to rank 0"),
            "carrying its node's joins to rank 0");
  worker_log().debug("rank {}: carried {} joins of its node to rank 0", contract.rank, joins.size());
  return static_cast<int>(joins.size());
}

}  // namespace hyrun::bootstrap
