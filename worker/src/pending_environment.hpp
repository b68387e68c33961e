#pragma once
// A rank that hyrun started before the job's bootstrap values were known
// (HYRUN_ROOT_PENDING=DIR) takes them here, from the file hyrun puts in DIR for it
// (hyrun/common/pending_environment.hpp). The World calls it after the rank's UCX context
// and worker exist, so that their set-up overlaps hyrun's exchange.
#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "hyrun/common/env_contract.hpp"

namespace hyrun {

/// Waits until `deadline` for the file, puts its variables in this process's environment
/// (so that the program and its libraries read them as if hyrun had set them at the start),
/// clears HYRUN_ROOT_PENDING and returns the contract read again. Returns `contract` as it
/// is when it has nothing pending. Throws TimeoutError past the deadline, Error when the
/// directory is not a private one of this user, is removed first (hyrun ended), or the file
/// is not a pending environment.
RankEnvironment receive_pending_environment(const RankEnvironment& contract,
                                            std::chrono::steady_clock::time_point deadline);

// The ranks of one node meet there too: the rank that carries the node's joins to rank 0
// (node_leader.hpp) puts its UCX address in DIR/leader ("hyrun-leader v1 <rank> <hex>\n",
// written whole, then renamed into place), and the node's other start ranks read it.
inline constexpr const char* kNodeLeaderFile = "leader";

/// Puts `rank`'s worker `address` in `dir`. Throws SystemError naming the file.
void put_node_leader_address(const std::string& dir, int rank, std::span<const std::byte> address);
/// Waits until `deadline` for rank `leader`'s address in `dir`. Throws TimeoutError past the
/// deadline, Error when the directory is not private, is removed first, or the file is not
/// `leader`'s address.
std::vector<std::byte> await_node_leader_address(const std::string& dir, int rank, int leader,
                                                 std::chrono::steady_clock::time_point deadline);

}  // namespace hyrun
