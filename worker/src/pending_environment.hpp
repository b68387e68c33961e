#pragma once
// A rank that hyrun started before the job's bootstrap values were known
// (HYRUN_ROOT_PENDING=DIR) takes them here, from the file hyrun puts in DIR for it
// (hyrun/common/pending_environment.hpp). The World calls it after the rank's UCX context
// and worker exist, so that their set-up overlaps hyrun's exchange.
#include <chrono>

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

}  // namespace hyrun
