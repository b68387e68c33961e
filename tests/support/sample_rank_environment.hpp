#pragma once
// For tests: the one placement the environment tests write and read back, so that their
// expected values (rank 5 of 8, local rank 1 of 4, node 1 of 2) have one source.
#include "hyrun/common/env_contract.hpp"

namespace hyrun::test_support {

/// Rank 5 of 8, local rank 1 of 4, on node 1 of 2; every other field at its default.
inline RankEnvironment sample_rank_environment() {
  RankEnvironment e;
  e.rank = 5;
  e.world_size = 8;
  e.local_rank = 1;
  e.local_world_size = 4;
  e.node_rank = 1;
  e.num_nodes = 2;
  return e;
}

}  // namespace hyrun::test_support
