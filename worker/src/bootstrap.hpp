#pragma once
// How a World gets its address table and endpoints (docs/architecture.md, "Bootstrap"):
//   start_root    rank 0: publishes its address on HYRUN_PUBLISH_FD, admits the joins of
//                 the start ranks, sends each of them the table
//   start_member  every other rank, and every rank that joins late: joins rank 0 with
//                 the root address, receives the table
//   admit_rejoins rank 0, once the World runs: admits the late joins that have arrived
// Every wait is bounded by the communicator's timeout.
#include <vector>

#include "communicator.hpp"
#include "hyrun/worker.hpp"
#include "join_admission.hpp"

namespace hyrun::bootstrap {

void start_root(Communicator& comm, JoinAdmission& admission);
void start_member(Communicator& comm);
/// Non-blocking: replaces each admitted rank's endpoint and sends it the current table.
std::vector<World::Rejoin> admit_rejoins(Communicator& comm, JoinAdmission& admission);

}  // namespace hyrun::bootstrap
