// The one check of an EP call's arguments that every backend makes (ep_call.hpp).
#include "hyrun/ep/ep_call.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>
#include <string>

#include <fmt/format.h>

#include "hyrun/common/error.hpp"
#include "refusal.hpp"

namespace hyrun::ep {
namespace {

Shape shape() { return Shape{.max_ranks = 8, .max_tokens = 64, .hidden = 256, .topk = 4, .experts_per_rank = 4}; }

const auto refusal = test_support::refusal<UsageError>;

TEST(EpCall, ADispatchCallOutsideItsRangesIsRefusedNamingTheArgument) {
  const Shape s = shape();
  EXPECT_EQ(refusal([&] { check_dispatch_call(s, 64, Routing::all(4), 0, 4, "transport ranks"); }), "");
  EXPECT_EQ(refusal([&] { check_dispatch_call(s, 65, Routing::all(4), 0, 4, "transport ranks"); }),
            "EP dispatch: num_tokens=65 outside [0, max_tokens=64]");
  EXPECT_EQ(refusal([&] { check_dispatch_call(s, -1, Routing::all(4), 0, 4, "transport ranks"); }),
            "EP dispatch: num_tokens=-1 outside [0, max_tokens=64]");
  EXPECT_EQ(refusal([&] { check_dispatch_call(s, 8, Routing::all(5), 0, 4, "peer regions"); }),
            "EP dispatch: routing.num_ranks=5 outside [1, min(max_ranks=8, peer regions=4)]");
  EXPECT_EQ(refusal([&] { check_dispatch_call(s, 8, Routing::all(9), 0, 16, "transport ranks"); }),
            "EP dispatch: routing.num_ranks=9 outside [1, min(max_ranks=8, transport ranks=16)]");
  EXPECT_EQ(refusal([&] {
              check_dispatch_call(s, 8, Routing{4, {1, 1, 1}}, 0, 4, "transport ranks");
            }),
            "EP dispatch: routing.active has 3 entries, num_ranks is 4");
  EXPECT_EQ(refusal([&] {
              check_dispatch_call(s, 8, Routing{4, {1, 0, 1, 1}}, 1, 4, "transport ranks");
            }),
            "EP dispatch: rank 1 is not active in the routing");
}

TEST(EpCall, ATokenThatSelectsAnExpertTwiceIsRefusedNamingItAtAnyPlace) {
  std::mt19937 random(std::random_device{}());
  const int K = 4, tokens = 32, experts = 32;
  const auto at = [K](int token, int k) { return static_cast<std::size_t>(token * K + k); };
  for (int round = 0; round < 50; ++round) {
    // Distinct experts per token, some selections empty (-1: allowed, and never a duplicate).
    std::vector<int64_t> idx(static_cast<std::size_t>(tokens * K));
    std::vector<int64_t> all(experts);
    std::iota(all.begin(), all.end(), 0);
    for (int i = 0; i < tokens; ++i) {
      std::shuffle(all.begin(), all.end(), random);
      std::copy_n(all.begin(), K, idx.begin() + i * K);
      for (int k = 0; k < K; ++k)
        if (random() % 3 == 0) idx[at(i, k)] = -1;
    }
    ASSERT_EQ(refusal([&] { check_distinct_experts(idx, K); }), "") << "distinct experts refused";
    // One token gets one expert twice, at two random slots.
    const int token = static_cast<int>(random() % tokens);
    const int k2 = 1 + static_cast<int>(random() % (K - 1)), k1 = static_cast<int>(random() % k2);
    const int64_t twice = static_cast<int64_t>(random() % experts);
    for (int k = 0; k < K; ++k)
      if (idx[at(token, k)] == twice) idx[at(token, k)] = -1;
    idx[at(token, k1)] = idx[at(token, k2)] = twice;
    const std::string said = refusal([&] { check_distinct_experts(idx, K); });
    EXPECT_NE(said.find(fmt::format("token {} selects expert {} twice (top-k {} and {})", token, twice, k1, k2)),
              std::string::npos)
        << said;
  }
}

TEST(EpCall, ACombineCallOutsideItsRangeIsRefused) {
  EXPECT_EQ(refusal([] { check_combine_call(shape(), 64); }), "");
  EXPECT_EQ(refusal([] { check_combine_call(shape(), 65); }), "EP combine: num_tokens=65 outside [0, max_tokens=64]");
}

}  // namespace
}  // namespace hyrun::ep
