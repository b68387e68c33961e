// Who carries a node's joins to rank 0 (node_leader.hpp): the start ranks of the rank's node,
// the lowest first, or none where the rank joins rank 0 itself.
#include "node_leader.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace hyrun::bootstrap {
namespace {

// Rank `rank` of a world of `world` ranks, `per_node` a node.
RankEnvironment contract_of(int rank, int world, int per_node, std::vector<int> start_ranks = {}) {
  RankEnvironment c;
  c.rank = rank;
  c.world_size = world;
  c.local_rank = rank % per_node;
  c.local_world_size = per_node;
  c.node_rank = rank / per_node;
  c.num_nodes = (world + per_node - 1) / per_node;
  c.start_ranks = std::move(start_ranks);
  return c;
}

TEST(NodeStartRanks, AreTheRanksOfTheNodeOfEveryRankOfIt) {
  for (int rank = 4; rank < 12; ++rank) {
    const auto ranks = node_start_ranks(contract_of(rank, 12, 4), true);
    ASSERT_TRUE(ranks) << rank;
    const int first = rank / 4 * 4;
    EXPECT_EQ(*ranks, (std::vector<int>{first, first + 1, first + 2, first + 3})) << rank;
  }
}

TEST(NodeStartRanks, AreOnlyTheStartRanksOfTheNode) {
  const std::vector<int> starting{0, 2, 5, 6, 7, 9};
  EXPECT_EQ(node_start_ranks(contract_of(6, 12, 4, starting), true), (std::vector<int>{5, 6, 7}));
  EXPECT_EQ(node_start_ranks(contract_of(5, 12, 4, starting), true), (std::vector<int>{5, 6, 7}));
  // Rank 9 is the node's only start rank: it joins rank 0 itself.
  EXPECT_EQ(node_start_ranks(contract_of(9, 12, 4, starting), true), std::nullopt);
  // A late rank joins rank 0 itself, whatever its node does.
  EXPECT_EQ(node_start_ranks(contract_of(4, 12, 4, starting), true), std::nullopt);
}

TEST(NodeStartRanks, NoneOnRank0sNodeWithoutAPendingDirectoryOrForARestartedRank) {
  for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(node_start_ranks(contract_of(rank, 12, 4), true), std::nullopt);
  EXPECT_EQ(node_start_ranks(contract_of(5, 12, 4), false), std::nullopt);
  auto restarted = contract_of(5, 12, 4);
  restarted.incarnation = 1;
  EXPECT_EQ(node_start_ranks(restarted, true), std::nullopt);
  EXPECT_EQ(node_start_ranks(contract_of(4, 5, 4), true), std::nullopt) << "one rank on its node";
}

}  // namespace
}  // namespace hyrun::bootstrap
