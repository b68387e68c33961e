#pragma once
// A node's joins, carried to rank 0 by one rank of the node: at the collective start rank 0
// takes one join message from each other node, not one from each rank (issue 39).
//
// A node is the ranks one hyrun starts: HYRUN_LOCAL_WORLD_SIZE ranks numbered on from
// HYRUN_RANK - HYRUN_LOCAL_RANK (every hyrun numbers the ranks of a collective start so). Its
// leader is its lowest start rank. The leader puts its address in the node's pending directory
// (pending_environment.hpp); the node's other start ranks read it there and send it their
// joins, sealed for rank 0 exactly as they would send them to rank 0; the leader takes each
// one that is sealed with the job's key, for rank 0, by a start rank of its node (once), and
// sends rank 0 one bundle with its own join. Rank 0 checks every join of a bundle as it
// checks one sent to it (join_admission.hpp), so a leader vouches for nothing.
//
// The ranks of rank 0's own node, ranks started with their whole environment (no pending
// directory), and ranks that join late send their joins to rank 0 themselves.
#include <optional>
#include <vector>

#include "communicator.hpp"
#include "hyrun/common/env_contract.hpp"
#include "message_auth.hpp"

namespace hyrun::bootstrap {

/// The start ranks of this rank's node, ascending (the first leads), when its joins go
/// through its node's leader; nullopt when this rank joins rank 0 itself. `pending`: the
/// rank started with a pending directory.
std::optional<std::vector<int>> node_start_ranks(const RankEnvironment& contract, bool pending);

/// The leader: takes the joins of `node_ranks` (but its own, `own`: sealed for rank 0) until
/// the communicator's deadline, and sends rank 0 (process `root_id`, on `root`) one bundle.
/// Returns how many joins it carried. Throws TimeoutError naming the ranks that did not send
/// theirs.
int carry_node_joins(Communicator& comm, ucp_ep_h root, auth::ProcessId root_id, const std::vector<int>& node_ranks,
                     std::vector<std::byte> own);

}  // namespace hyrun::bootstrap
