// ep-check's reference inputs and checks: the inputs have the reference structure, and
// the checks accept the host backend's outputs and reject a single wrong element.
#include <gtest/gtest.h>

#include <set>

#include "hyrun/common/error.hpp"
#include "hyrun/ep/reference_checks.hpp"
#include "hyrun/ep/reference_inputs.hpp"

using namespace hyrun::ep;
using namespace hyrun::ep::check;
using namespace std::chrono_literals;

TEST(ReferenceInputs, ParseShapes) {
  const auto s = parse_shapes("1:2048:1,256:8192:8");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[1].tokens, 256);
  EXPECT_EQ(s[1].hidden, 8192);
  EXPECT_EQ(s[1].topk, 8);
  EXPECT_THROW(parse_shapes("128:7168"), hyrun::UsageError);
  EXPECT_THROW(parse_shapes("128:7000:8"), hyrun::UsageError);
  EXPECT_THROW(parse_shapes("0:2048:1"), hyrun::UsageError);
  EXPECT_THROW(parse_shapes(""), hyrun::UsageError);
}

TEST(ReferenceInputs, StructureAndReproducibility) {
  const CaseShape c{64, 2048, 8};
  const auto a = make_rank_inputs(c, 4, 2, 3, 42, 5);
  const auto b = make_rank_inputs(c, 4, 2, 3, 42, 5);
  EXPECT_EQ(a.topk_idx, b.topk_idx);
  EXPECT_NE(a.topk_idx, make_rank_inputs(c, 4, 2, 2, 42, 5).topk_idx);
  int minus = 0;
  for (int i = 0; i < c.tokens; ++i) {
    std::set<int64_t> seen;
    for (int k = 0; k < c.topk; ++k) {
      const int64_t g = a.topk_idx[i * c.topk + k];
      if (g < 0) {
        ++minus;
        continue;
      }
      EXPECT_LT(g, 8);
      EXPECT_TRUE(seen.insert(g).second) << "token " << i << " repeats expert " << g;
    }
    for (int ch = 0; ch < c.hidden; ++ch)
      ASSERT_EQ(bf16_to_float(a.x[static_cast<std::size_t>(i) * c.hidden + ch]),
                ch < c.hidden - 128 ? -125.0f : static_cast<float>(i));
  }
  EXPECT_GT(minus, 0);
}

TEST(ReferenceChecks, AcceptBackendOutputsRejectOneWrongElement) {
  const int R = 3, E = 2;
  const CaseShape c{16, 2048, 4};
  const Shape s{R, c.tokens, c.hidden, c.topk, E};
  for (Format f : {Format::kFP8, Format::kBF16}) {
    std::vector<RankInputs> all;
    for (int r = 0; r < R; ++r) all.push_back(make_rank_inputs(c, R, E, r, 9, 0));
    InProcessFabric fabric(R, region_bytes(s));
    std::vector<std::unique_ptr<HostBackend>> ep;
    std::vector<DispatchBuffers> out;
    for (int r = 0; r < R; ++r) {
      ep.push_back(std::make_unique<HostBackend>(s, fabric.transport(r), 5000ms));
      out.emplace_back(s, f);
      out.back().poison();
    }
    const Routing routing = Routing::all(R);
    for (int r = 0; r < R; ++r) ep[r]->dispatch_send(all[r].x.data(), all[r].topk_idx.data(), c.tokens, routing, f);
    for (int r = 0; r < R; ++r) ep[r]->dispatch_recv(out[r].view());
    std::vector<std::vector<uint16_t>> eo;
    for (int r = 0; r < R; ++r) {
      CheckReport rep;
      check_dispatch(s, f, r, routing, all, out[r], rep);
      EXPECT_TRUE(rep.ok) << (rep.problems.empty() ? "" : rep.problems[0]);
      EXPECT_GT(rep.rows_checked, 0u);
      eo.push_back(identity_expert_out(s, f, out[r]));
    }
    for (int r = 0; r < R; ++r) ep[r]->combine_send(eo[r].data(), out[r].view());
    std::vector<std::vector<uint16_t>> y(R, std::vector<uint16_t>(static_cast<std::size_t>(c.tokens) * c.hidden));
    for (int r = 0; r < R; ++r)
      ep[r]->combine_recv(all[r].topk_idx.data(), all[r].topk_weights.data(), c.tokens, y[r].data());
    for (int r = 0; r < R; ++r) {
      CheckReport rep;
      check_combine(s, f, routing, all[r], y[r], rep);
      EXPECT_TRUE(rep.ok) << (rep.problems.empty() ? "" : rep.problems[0]);
      EXPECT_LT(rep.combine_diff, combine_threshold(f));
    }
    // One wrong element of the combine output, and one wrong received byte, are caught.
    y[0][5] = float_to_bf16(bf16_to_float(y[0][5]) * 1.5f);
    CheckReport bad_combine;
    check_combine(s, f, routing, all[0], y[0], bad_combine);
    EXPECT_FALSE(bad_combine.ok);
    out[1].recv_x[0] ^= 0x04;
    CheckReport bad_dispatch;
    check_dispatch(s, f, 1, routing, all, out[1], bad_dispatch);
    EXPECT_FALSE(bad_dispatch.ok);
  }
}
