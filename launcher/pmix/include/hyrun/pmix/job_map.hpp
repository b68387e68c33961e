#pragma once
// The job as hyrun's PMIx server describes it to the node's ranks: one namespace for the
// whole job, its nodes and which ranks each holds, and the binding of this node's ranks.
// namespace_info() turns it into what PMIx_server_register_nspace takes: the job-level keys
// (sizes, node and process maps), each node's keys (local peers, leader) and every
// process's keys (rank, local and node rank, node, host, and for local ranks the cpuset and
// locality string), the keys Open MPI, mpi4py and other PMIx clients start from.
#include <cstdint>
#include <string>
#include <vector>

#include "hyrun/pmix/info_list.hpp"

namespace hyrun::pmix {

struct JobMap {
  std::string nspace;                             ///< unique per job: MPI libraries derive job ids from it
  std::vector<std::string> hosts;                 ///< one per node; the node id is the index
  std::vector<std::vector<std::uint32_t>> ranks;  ///< the ranks of each node, ascending
  std::size_t node = 0;                           ///< this node's index
  std::vector<std::vector<int>> local_cpus;       ///< per rank of this node: OS CPU indexes; empty = unbound
  std::string tmpdir;                             ///< the job's private directory on this node (PMIX_TMPDIR)

  std::uint32_t size() const;  ///< every rank of the job
};

/// The info array for PMIx_server_register_nspace. Throws hyrun::Error (naming the key)
/// when libpmix refuses a value.
InfoArray namespace_info(const JobMap& map);

}  // namespace hyrun::pmix
