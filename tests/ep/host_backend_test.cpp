// Host backend: dispatch + combine with several simulated ranks in one process over the
// in-process transport (a unit-test device, not an integration test). Checks are the
// DeepEP / NIXL Elastic EP low-latency checks (see EP-REFERENCE.md).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <span>
#include <thread>
#include <tuple>
#include <vector>

#include "hyrun/ep/host_backend.hpp"

using namespace hyrun::ep;
using namespace std::chrono_literals;

namespace {

struct RankInput {
  int num_tokens = 0;
  std::vector<uint16_t> x;        // [num_tokens, H]
  std::vector<int64_t> topk_idx;  // [num_tokens, K]
  std::vector<float> weights;     // [num_tokens, K]
};

// x rows: rank - 128 except the last 128 columns = token index; random top-k (distinct
// experts when possible) with ~15% -1 entries; weights uniform in [0, 1).
RankInput make_input(const Shape& s, int num_ranks, int rank, int num_tokens, std::mt19937& rng, bool random_x) {
  RankInput in;
  in.num_tokens = num_tokens;
  const int H = s.hidden, K = s.topk, NE = num_ranks * s.experts_per_rank;
  in.x.resize(static_cast<std::size_t>(num_tokens) * H);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int i = 0; i < num_tokens; ++i)
    for (int c = 0; c < H; ++c)
      in.x[static_cast<std::size_t>(i) * H + c] =
          random_x ? float_to_bf16(nd(rng))
                   : float_to_bf16(c >= H - 128 ? static_cast<float>(i) : static_cast<float>(rank - 128));
  in.topk_idx.resize(static_cast<std::size_t>(num_tokens) * K);
  in.weights.resize(in.topk_idx.size());
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<int64_t> perm(static_cast<std::size_t>(NE));
  for (int i = 0; i < num_tokens; ++i) {
    for (int e = 0; e < NE; ++e) perm[e] = e;
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int k = 0; k < K; ++k) {
      int64_t g = k < NE ? perm[k] : -1;  // a token's experts are distinct (as top-k gives them)
      if (u(rng) < 0.15f) g = -1;
      in.topk_idx[static_cast<std::size_t>(i) * K + k] = g;
      in.weights[static_cast<std::size_t>(i) * K + k] = u(rng);
    }
  }
  return in;
}

double calc_diff(const std::vector<double>& x, const std::vector<double>& y) {
  double xy = 0, xx_yy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double a = x[i] + 1, b = y[i] + 1;
    xy += a * b;
    xx_yy += a * a + b * b;
  }
  return 1 - 2 * xy / xx_yy;
}

// Every rank of a test over one in-process fabric: its backend, its dispatch outputs, and a
// full batch of input tokens (drawn from `seed` in rank order).
struct Ranks {
  Ranks(const Shape& shape, std::chrono::milliseconds timeout, Format format, unsigned seed, bool random_x)
      : s(shape), fabric(shape.max_ranks, region_bytes(shape)) {
    std::mt19937 rng(seed);
    for (int r = 0; r < s.max_ranks; ++r) {
      be.push_back(std::make_unique<HostBackend>(s, fabric.transport(r), timeout));
      out.emplace_back(s, format);
      in.push_back(make_input(s, s.max_ranks, r, s.max_tokens, rng, random_x));
    }
  }
  Shape s;
  InProcessFabric fabric;
  std::vector<std::unique_ptr<HostBackend>> be;
  std::vector<DispatchBuffers> out;
  std::vector<RankInput> in;
};

void poison_region_data(std::span<std::byte> region, const RegionLayout& l) {
  std::memset(region.data() + l.dispatch_data, 0xFF, l.dispatch_counts - l.dispatch_data);
  std::memset(region.data() + l.combine_data, 0xFF, l.dispatch_signals - l.combine_data);
}

struct Case {
  int ranks, max_tokens, hidden, topk, experts_per_rank;
  Format format;
  std::vector<int> inactive;  // masked ranks
  int iterations = 1;
  bool random_x = false;
  bool fewer_tokens = false;  // each rank passes a different num_tokens <= max_tokens
};

std::string name_of(const Case& c) {
  return fmt::format("R{}_T{}_H{}_K{}_E{}_{}_inactive{}{}{}", c.ranks, c.max_tokens, c.hidden, c.topk,
                     c.experts_per_rank, to_string(c.format), c.inactive.size(), c.random_x ? "_randx" : "",
                     c.fewer_tokens ? "_fewer" : "");
}

// Rank `r`'s received rows against its sources' inputs (`expect`: the rows per global expert
// and source), and its identity expert outputs built from them.
void check_received(const Case& c, const Shape& s, int r, const DispatchBuffers& o, const std::vector<RankInput>& in,
                    const std::vector<int>& expect, std::vector<uint16_t>& expert_out) {
  const int H = s.hidden, K = s.topk, E = s.experts_per_rank, R = s.max_ranks, T = s.max_tokens;
  expert_out.assign(recv_rows(s) * H, 0xFFFF);  // NaN everywhere no row was received
  for (int e = 0; e < E; ++e) {
    int total = 0;
    for (int src = 0; src < R; ++src) {
      const int n = o.layout_count[static_cast<std::size_t>(e) * R + src];
      const int want = src < c.ranks ? expect[(static_cast<std::size_t>(r) * E + e) * c.ranks + src] : 0;
      ASSERT_EQ(n, want) << "rank " << r << " expert " << e << " from " << src;
      total += n;
      std::set<std::pair<int, int>> seen;
      for (int j = 0; j < n; ++j) {
        const std::size_t row = (static_cast<std::size_t>(e) * R + src) * T + j;
        const int tok = o.recv_src_token[row], k = o.recv_src_topk[row];
        ASSERT_TRUE(tok >= 0 && tok < in[src].num_tokens && k >= 0 && k < K) << tok << " " << k;
        ASSERT_EQ(in[src].topk_idx[static_cast<std::size_t>(tok) * K + k], static_cast<int64_t>(r) * E + e);
        ASSERT_TRUE(seen.insert({tok, k}).second) << "duplicate row";
        uint16_t* y = expert_out.data() + row * H;
        for (int ch = 0; ch < H; ++ch) {
          float v;
          if (c.format == Format::kFP8)
            v = dequantize_fp8(o.recv_x[row * H + ch], o.recv_scales[row * (H / 128) + ch / 128]);
          else
            v = bf16_to_float(reinterpret_cast<const uint16_t*>(o.recv_x.data())[row * H + ch]);
          ASSERT_FALSE(std::isnan(v));
          y[ch] = float_to_bf16(v);
          const float xv = bf16_to_float(in[src].x[static_cast<std::size_t>(tok) * H + ch]);
          if (!c.random_x) {
            // constant row = src - 128, last 128 columns = source token index (exact after bf16)
            ASSERT_EQ(bf16_to_float(y[ch]), ch >= H - 128 ? static_cast<float>(tok) : static_cast<float>(src - 128))
                << "rank " << r << " row " << row << " ch " << ch;
          } else if (c.format == Format::kBF16) {
            ASSERT_EQ(bf16_to_float(y[ch]), xv);
          } else {
            const float amax =
                bf16_block_amax(in[src].x.data() + static_cast<std::size_t>(tok) * H + ch / 128 * 128, 128);
            ASSERT_LE(std::fabs(v - xv), std::max(std::fabs(xv) / 16, amax / 448 / 1024) * 1.001f + 1e-30f);
          }
        }
      }
    }
    ASSERT_EQ(o.recv_count[e], total);
  }
}

// Rank `r`'s combined tokens `y` against its input scaled by the weights of its kept
// selections (a token with none of them kept must be zero).
void check_combined(const Case& c, const Shape& s, int r, int it, const RankInput& in, const Routing& routing,
                    const std::vector<uint16_t>& y) {
  const int H = s.hidden, K = s.topk, E = s.experts_per_rank;
  std::vector<double> want(y.size()), got(y.size());
  for (int i = 0; i < in.num_tokens; ++i) {
    double wsum = 0;
    float wsum_f = 0;
    for (int k = 0; k < K; ++k)
      if (kept_expert(in.topk_idx[static_cast<std::size_t>(i) * K + k], E, routing) >= 0) {
        wsum += in.weights[static_cast<std::size_t>(i) * K + k];
        wsum_f += in.weights[static_cast<std::size_t>(i) * K + k];
      }
    for (int ch = 0; ch < H; ++ch) {
      const std::size_t p = static_cast<std::size_t>(i) * H + ch;
      got[p] = bf16_to_float(y[p]);
      ASSERT_FALSE(std::isnan(got[p])) << "rank " << r << " token " << i << " ch " << ch;
      want[p] = static_cast<double>(bf16_to_float(in.x[p])) * wsum;
      if (wsum_f == 0) {
        ASSERT_EQ(got[p], 0.0);
      }
    }
  }
  const double diff = calc_diff(want, got);
  EXPECT_LT(diff, c.format == Format::kFP8 ? 9e-4 : 1e-5) << "rank " << r << " iteration " << it;
}

// Runs dispatch + identity experts + combine for every active rank and checks everything.
void run_case(const Case& c) {
  SCOPED_TRACE(name_of(c));
  const Shape s{c.ranks, c.max_tokens, c.hidden, c.topk, c.experts_per_rank};
  const int H = s.hidden, K = s.topk, E = s.experts_per_rank, T = s.max_tokens;
  const RegionLayout l = region_layout(s);
  InProcessFabric fabric(c.ranks, l.total);
  Routing routing{c.ranks, std::vector<uint8_t>(static_cast<std::size_t>(c.ranks), 1)};
  for (int r : c.inactive) routing.active[r] = 0;
  std::vector<int> active;
  for (int r = 0; r < c.ranks; ++r)
    if (routing.active[r]) active.push_back(r);

  std::vector<std::unique_ptr<HostBackend>> be;
  std::vector<DispatchBuffers> out;
  for (int r = 0; r < c.ranks; ++r) {
    be.push_back(std::make_unique<HostBackend>(s, fabric.transport(r), 5000ms));
    out.emplace_back(s, c.format);
  }
  std::mt19937 rng(static_cast<unsigned>(c.ranks * 7919 + c.max_tokens * 31 + c.hidden + c.topk * 3 + E));
  for (int it = 0; it < c.iterations; ++it) {
    std::vector<RankInput> in(static_cast<std::size_t>(c.ranks));
    for (int r = 0; r < c.ranks; ++r) {
      const int n = c.fewer_tokens ? 1 + static_cast<int>(rng() % T) : T;
      in[r] = make_input(s, c.ranks, r, n, rng, c.random_x);
      poison_region_data(fabric.region(r), l);
    }
    // ---- dispatch
    for (int r : active)
      be[r]->dispatch_send(in[r].x.data(), in[r].topk_idx.data(), in[r].num_tokens, routing, c.format);
    for (int r : active) {
      out[r].poison();
      be[r]->dispatch_recv(out[r].view());
    }
    // expected counts per (global expert, source rank), after masking
    std::vector<int> expect(static_cast<std::size_t>(c.ranks) * E * c.ranks, 0);
    for (int src : active)
      for (int i = 0; i < in[src].num_tokens * K; ++i) {
        const int64_t g = kept_expert(in[src].topk_idx[i], E, routing);
        if (g >= 0) ++expect[static_cast<std::size_t>(g) * c.ranks + src];
      }
    // ---- check received rows; build identity expert outputs
    std::vector<std::vector<uint16_t>> expert_out(static_cast<std::size_t>(c.ranks));
    for (int r : active) ASSERT_NO_FATAL_FAILURE(check_received(c, s, r, out[r], in, expect, expert_out[r]));
    // ---- combine
    for (int r : active) be[r]->combine_send(expert_out[r].data(), out[r].view());
    for (int r : active) {
      std::vector<uint16_t> y(static_cast<std::size_t>(in[r].num_tokens) * H, 0xFFFF);
      be[r]->combine_recv(in[r].topk_idx.data(), in[r].weights.data(), in[r].num_tokens, y.data());
      ASSERT_NO_FATAL_FAILURE(check_combined(c, s, r, it, in[r], routing, y));
    }
  }
}

class EpHostBackend : public ::testing::TestWithParam<Case> {};
TEST_P(EpHostBackend, DispatchCombineMatchesReference) { run_case(GetParam()); }

INSTANTIATE_TEST_SUITE_P(
    Shapes, EpHostBackend,
    ::testing::Values(Case{1, 1, 2048, 1, 1, Format::kFP8, {}}, Case{1, 16, 2048, 4, 5, Format::kBF16, {}},
                      Case{2, 256, 8192, 8, 4, Format::kFP8, {}}, Case{2, 64, 7168, 8, 4, Format::kBF16, {}},
                      Case{3, 33, 2560, 6, 2, Format::kFP8, {}, 3, false, true},
                      Case{4, 128, 7168, 8, 2, Format::kFP8, {2}}, Case{4, 64, 4096, 6, 4, Format::kBF16, {1, 3}},
                      Case{8, 64, 4096, 8, 2, Format::kFP8, {}}, Case{8, 32, 3072, 8, 1, Format::kFP8, {5, 6}, 2},
                      Case{8, 16, 5120, 2, 2, Format::kBF16, {0}, 2, false, true},
                      Case{4, 24, 2048, 3, 2, Format::kFP8, {}, 1, true},
                      Case{4, 24, 2048, 3, 2, Format::kBF16, {3}, 1, true},
                      Case{3, 8, 2048, 8, 1, Format::kFP8, {}}  // top-k larger than the number of experts: -1 padding
                      ),
    [](const ::testing::TestParamInfo<Case>& i) { return name_of(i.param); });

// Exact check of the combine arithmetic: BF16 dispatch of random x with identity experts
// gives out = bf16(sum_k w_k * x) computed in selection order.
TEST(EpHostBackendExact, Bf16CombineIsExactWeightedSum) {
  Ranks ranks({3, 20, 2048, 4, 2}, 5000ms, Format::kBF16, 5, true);
  auto& [s, fabric, be, out, in] = ranks;
  const Routing routing = Routing::all(3);
  for (int r = 0; r < 3; ++r) be[r]->dispatch_send(in[r].x.data(), in[r].topk_idx.data(), 20, routing, Format::kBF16);
  for (int r = 0; r < 3; ++r) be[r]->dispatch_recv(out[r].view());
  for (int r = 0; r < 3; ++r)
    be[r]->combine_send(reinterpret_cast<const uint16_t*>(out[r].recv_x.data()), out[r].view());
  for (int r = 0; r < 3; ++r) {
    std::vector<uint16_t> y(20 * 2048);
    be[r]->combine_recv(in[r].topk_idx.data(), in[r].weights.data(), 20, y.data());
    for (int i = 0; i < 20; ++i)
      for (int ch = 0; ch < 2048; ++ch) {
        float acc = 0;
        for (int k = 0; k < 4; ++k)
          if (in[r].topk_idx[i * 4 + k] >= 0)
            acc = acc + bf16_to_float(in[r].x[i * 2048 + ch]) * in[r].weights[i * 4 + k];
        ASSERT_EQ(y[i * 2048 + ch], float_to_bf16(acc)) << r << " " << i << " " << ch;
      }
  }
}

// A rank that never sends is reported by rank at the deadline; the survivors mask it
// and the next call succeeds (the elastic recovery path).
TEST(EpHostBackendFaults, SilentRankIsReportedThenMasked) {
  Ranks ranks({3, 8, 2048, 2, 1}, 200ms, Format::kFP8, 9, false);
  auto& [s, fabric, be, out, in] = ranks;
  const Routing all = Routing::all(3);
  for (int r = 0; r < 2; ++r) be[r]->dispatch_send(in[r].x.data(), in[r].topk_idx.data(), 8, all, Format::kFP8);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    be[0]->dispatch_recv(out[0].view());
    FAIL() << "expected PeerTimeoutError";
  } catch (const PeerTimeoutError& e) {
    EXPECT_EQ(e.ranks(), std::vector<int>{2});
    EXPECT_NE(std::string(e.what()).find("rank(s) 2"), std::string::npos) << e.what();
    EXPECT_EQ(e.exit_code(), hyrun::exit_code::kTimeout);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  // rank 1 would see the same; both mask rank 2 and go on.
  Routing masked{3, {1, 1, 0}};
  for (int r = 0; r < 2; ++r) be[r]->dispatch_send(in[r].x.data(), in[r].topk_idx.data(), 8, masked, Format::kFP8);
  for (int r = 0; r < 2; ++r) EXPECT_NO_THROW(be[r]->dispatch_recv(out[r].view()));
  for (int r = 0; r < 2; ++r) {
    int total = 0;
    for (int i = 0; i < 8 * 2; ++i) total += kept_expert(in[r].topk_idx[i], 1, masked) == r ? 1 : 0;
    (void)total;
  }
  std::vector<uint16_t> eo(recv_rows(s) * 2048, 0);
  for (int r = 0; r < 2; ++r) be[r]->combine_send(eo.data(), out[r].view());
  std::vector<uint16_t> y(8 * 2048);
  for (int r = 0; r < 2; ++r)
    EXPECT_NO_THROW(be[r]->combine_recv(in[r].topk_idx.data(), in[r].weights.data(), 8, y.data()));
}

TEST(EpHostBackendFaults, WritesToDeadRankFailNamingIt) {
  const Shape s{2, 4, 2048, 2, 1};
  InProcessFabric fabric(2, region_bytes(s));
  HostBackend be(s, fabric.transport(0), 100ms);
  fabric.kill(1);
  std::vector<uint16_t> x(4 * 2048, 0);
  std::vector<int64_t> idx = {0, 1, 1, -1, 0, 1, 1, 0};
  try {
    be.dispatch_send(x.data(), idx.data(), 4, Routing::all(2), Format::kFP8);
    FAIL() << "expected PeerFailureError";
  } catch (const PeerFailureError& e) {
    EXPECT_EQ(e.ranks(), std::vector<int>{1});
  }
}

TEST(EpHostBackendUsage, RejectsBadArguments) {
  const Shape s{2, 4, 2048, 2, 1};
  InProcessFabric small(2, 1024);
  EXPECT_THROW(HostBackend(s, small.transport(0), 100ms), hyrun::UsageError);
  InProcessFabric fabric(2, region_bytes(s));
  HostBackend be(s, fabric.transport(0), 100ms);
  std::vector<uint16_t> x(8 * 2048, 0);
  std::vector<int64_t> idx(16, 0);
  EXPECT_THROW(be.dispatch_send(x.data(), idx.data(), 5, Routing::all(2), Format::kFP8), hyrun::UsageError);
  EXPECT_THROW(be.dispatch_send(x.data(), idx.data(), 4, Routing::all(3), Format::kFP8), hyrun::UsageError);
  EXPECT_THROW(be.dispatch_send(x.data(), idx.data(), 4, Routing{2, {0, 1}}, Format::kFP8), hyrun::UsageError);
  // a token selecting the same expert twice is rejected before anything is sent
  std::vector<int64_t> dup = {0, 1, 1, 1, 0, -1, 1, 0};
  EXPECT_THROW(be.dispatch_send(x.data(), dup.data(), 4, Routing::all(2), Format::kFP8), hyrun::UsageError);
  // distinct experts with -1 padding pass
  std::vector<int64_t> ok = {0, 1, -1, -1, 0, -1, 1, 0};
  EXPECT_NO_THROW(be.dispatch_send(x.data(), ok.data(), 4, Routing::all(2), Format::kFP8));
}

// One thread per rank, blocking dispatch() and combine(), several iterations re-using
// the single receive region: exercises the alternation argument of host_backend.hpp.
TEST(EpHostBackendThreads, BlockingCallsFromOneThreadPerRank) {
  const int R = 4, T = 16, H = 2048, K = 4, E = 2;
  const Shape s{R, T, H, K, E};
  InProcessFabric fabric(R, region_bytes(s));
  std::vector<std::string> errors(R);
  std::vector<double> worst(R, 0);
  std::vector<std::thread> th;
  for (int r = 0; r < R; ++r)
    th.emplace_back([&, r] {
      try {
        HostBackend be(s, fabric.transport(r), 10000ms);
        DispatchBuffers out(s, Format::kFP8);
        std::mt19937 rng(100 + r);
        for (int it = 0; it < 6; ++it) {
          RankInput in = make_input(s, R, r, T, rng, false);
          out.poison();
          be.dispatch(in.x.data(), in.topk_idx.data(), T, Routing::all(R), Format::kFP8, out.view());
          std::vector<uint16_t> eo(recv_rows(s) * H, 0xFFFF);
          for (int e = 0; e < E; ++e)
            for (int src = 0; src < R; ++src)
              for (int j = 0; j < out.layout_count[e * R + src]; ++j) {
                const std::size_t row = (static_cast<std::size_t>(e) * R + src) * T + j;
                for (int ch = 0; ch < H; ++ch)
                  eo[row * H + ch] =
                      float_to_bf16(dequantize_fp8(out.recv_x[row * H + ch], out.recv_scales[row * 16 + ch / 128]));
              }
          std::vector<uint16_t> y(T * H, 0xFFFF);
          be.combine(eo.data(), out.view(), in.topk_idx.data(), in.weights.data(), T, y.data());
          std::vector<double> want(y.size()), got(y.size());
          for (int i = 0; i < T; ++i) {
            double w = 0;
            for (int k = 0; k < K; ++k)
              if (in.topk_idx[i * K + k] >= 0) w += in.weights[i * K + k];
            for (int ch = 0; ch < H; ++ch) {
              want[i * H + ch] = bf16_to_float(in.x[i * H + ch]) * w;
              got[i * H + ch] = bf16_to_float(y[i * H + ch]);
            }
          }
          worst[r] = std::max(worst[r], calc_diff(want, got));
        }
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : th) t.join();
  for (int r = 0; r < R; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_LT(worst[r], 9e-4) << "rank " << r;
  }
}

// The fused dispatch()/combine() skip the region for this rank's own rows (written
// straight into the outputs, reduced straight from expert_out); the split calls go
// through the region. Both must give the same bits in every output, for both formats,
// with a masked rank, over several rounds re-using the region. So must the fused calls
// that read recv_x / recv_scales from the region itself (region_rows: the rows are not
// copied), and the split calls over a transport that maps no peer (every row, header and
// scale block put, the sources read at the flush as a network would).
struct RoundOutputs {
  std::vector<int32_t> layout_count, recv_count, src_token, src_topk;
  std::vector<uint8_t> recv_x;       // rows within the counts only
  std::vector<uint32_t> scale_bits;  // rows within the counts only (FP8)
  std::vector<uint16_t> y;
};
RoundOutputs collect(const Shape& s, Format f, const DispatchOutput& out) {
  RoundOutputs o;
  const int E = s.experts_per_rank, R = s.max_ranks;
  o.layout_count.assign(out.layout_count, out.layout_count + static_cast<std::size_t>(E) * R);
  o.recv_count.assign(out.recv_count, out.recv_count + E);
  const int H = s.hidden, nb = H / 128, row_bytes = f == Format::kFP8 ? H : 2 * H;
  const auto* x = static_cast<const uint8_t*>(out.recv_x);
  for (int e = 0; e < E; ++e)
    for (int src = 0; src < R; ++src)
      for (int j = 0; j < out.layout_count[e * R + src]; ++j) {
        const std::size_t row = (static_cast<std::size_t>(e) * R + src) * s.max_tokens + j;
        o.src_token.push_back(out.recv_src_token[row]);
        o.src_topk.push_back(out.recv_src_topk[row]);
        o.recv_x.insert(o.recv_x.end(), x + row * row_bytes, x + (row + 1) * row_bytes);
        if (f == Format::kFP8)
          for (int b = 0; b < nb; ++b) {
            uint32_t u;
            std::memcpy(&u, &out.recv_scales[row * nb + b], 4);
            o.scale_bits.push_back(u);
          }
      }
  return o;
}
// Expert outputs from a dispatch output: a fixed bf16 function of each received row
// (rows not covered by the counts give NaN).
std::vector<uint16_t> expert_outputs(const Shape& s, Format f, const DispatchOutput& out) {
  const int H = s.hidden, E = s.experts_per_rank, R = s.max_ranks;
  const auto* x = static_cast<const uint8_t*>(out.recv_x);
  std::vector<uint16_t> eo(recv_rows(s) * H, 0xFFFF);
  for (int e = 0; e < E; ++e)
    for (int src = 0; src < R; ++src)
      for (int j = 0; j < out.layout_count[e * R + src]; ++j) {
        const std::size_t row = (static_cast<std::size_t>(e) * R + src) * s.max_tokens + j;
        for (int c = 0; c < H; ++c) {
          const std::size_t i = row * H + c;
          eo[i] = f == Format::kFP8
                      ? float_to_bf16(dequantize_fp8(x[i], out.recv_scales[row * (H / 128) + c / 128]) * 1.5f)
                      : static_cast<uint16_t>(x[2 * i] | x[2 * i + 1] << 8);
        }
      }
  return eo;
}

using PerRound = std::vector<std::vector<RoundOutputs>>;  // [round][rank]
using RoundInputs = std::vector<std::vector<RankInput>>;  // [round][rank]

// Split calls from one thread.
PerRound run_split(const Shape& s, Format f, std::span<const Routing> routings, const RoundInputs& inputs,
                   InProcessFabric::Writes writes) {
  const int R = s.max_ranks, T = s.max_tokens, H = s.hidden;
  PerRound split(routings.size());
  InProcessFabric fabric(R, region_bytes(s), writes);
  std::vector<std::unique_ptr<HostBackend>> be;
  std::vector<DispatchBuffers> out;
  for (int r = 0; r < R; ++r) {
    be.push_back(std::make_unique<HostBackend>(s, fabric.transport(r), 10000ms));
    out.emplace_back(s, f);
  }
  for (std::size_t round = 0; round < routings.size(); ++round) {
    const Routing& routing = routings[round];
    std::vector<std::vector<uint16_t>> eo(R);
    for (int r = 0; r < R; ++r) {
      if (!routing.is_active(r)) continue;
      be[r]->set_epoch(static_cast<uint64_t>(round + 1) << 32);  // a rank rejoins after its masked round
      out[r].poison();
      be[r]->dispatch_send(inputs[round][r].x.data(), inputs[round][r].topk_idx.data(), T, routing, f);
    }
    for (int r = 0; r < R; ++r)
      if (routing.is_active(r)) be[r]->dispatch_recv(out[r].view());
    for (int r = 0; r < R; ++r) {
      if (!routing.is_active(r)) continue;
      eo[r] = expert_outputs(s, f, out[r].view());
      be[r]->combine_send(eo[r].data(), out[r].view());
    }
    for (int r = 0; r < R; ++r) {
      split[round].emplace_back();
      if (!routing.is_active(r)) continue;
      std::vector<uint16_t> y(static_cast<std::size_t>(T) * H, 0xFFFF);
      be[r]->combine_recv(inputs[round][r].topk_idx.data(), inputs[round][r].weights.data(), T, y.data());
      split[round][r] = collect(s, f, out[r].view());
      split[round][r].y = std::move(y);
    }
  }
  return split;
}

// Rank `r`'s fused calls of every round; `in_region`: recv_x / recv_scales are the region's rows.
void fused_rank(const Shape& s, Format f, std::span<const Routing> routings, const RoundInputs& inputs, bool in_region,
                InProcessFabric& fabric, int r, PerRound& fused) {
  const int T = s.max_tokens, H = s.hidden;
  HostBackend be(s, fabric.transport(r), 10000ms);
  DispatchBuffers out(s, f);
  for (std::size_t round = 0; round < routings.size(); ++round) {
    const Routing& routing = routings[round];
    if (!routing.is_active(r)) continue;
    const RankInput& in = inputs[round][r];
    be.set_epoch(static_cast<uint64_t>(round + 1) << 32);
    out.poison();
    DispatchOutput view = out.view();
    if (in_region) {
      const RegionRows rows = be.region_rows(f);
      view.recv_x = rows.recv_x;
      view.recv_scales = rows.recv_scales;
    }
    be.dispatch(in.x.data(), in.topk_idx.data(), T, routing, f, view);
    // The region's rows are valid until combine: read them before.
    const auto eo = expert_outputs(s, f, view);
    fused[round][r] = collect(s, f, view);
    std::vector<uint16_t> y(static_cast<std::size_t>(T) * H, 0xFFFF);
    be.combine(eo.data(), view, in.topk_idx.data(), in.weights.data(), T, y.data());
    fused[round][r].y = std::move(y);
  }
}

// Fused calls, one thread per rank.
PerRound run_fused(const Shape& s, Format f, std::span<const Routing> routings, const RoundInputs& inputs,
                   bool in_region) {
  const int R = s.max_ranks;
  PerRound fused(routings.size(), std::vector<RoundOutputs>(R));
  std::vector<std::string> errors(R);
  InProcessFabric fabric(R, region_bytes(s));
  std::vector<std::thread> th;
  for (int r = 0; r < R; ++r)
    th.emplace_back([&, r] {
      try {
        fused_rank(s, f, routings, inputs, in_region, fabric, r, fused);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : th) t.join();
  for (int r = 0; r < R; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  return fused;
}

// `other` has the same bits as `split`, every round and rank; an active rank has outputs.
void expect_same_bits(const PerRound& split, const PerRound& other, const char* what, Format f,
                      std::span<const Routing> routings) {
  for (std::size_t round = 0; round < split.size(); ++round)
    for (std::size_t r = 0; r < split[round].size(); ++r) {
      const auto& a = split[round][r];
      const auto& b = other[round][r];
      const std::string where = fmt::format("{}: {} round {} rank {}", what, to_string(f), round, r);
      EXPECT_EQ(a.layout_count, b.layout_count) << where;
      EXPECT_EQ(a.recv_count, b.recv_count) << where;
      EXPECT_EQ(a.src_token, b.src_token) << where;
      EXPECT_EQ(a.src_topk, b.src_topk) << where;
      EXPECT_TRUE(a.recv_x == b.recv_x) << where;
      EXPECT_TRUE(a.scale_bits == b.scale_bits) << where;
      EXPECT_TRUE(a.y == b.y) << where;
      if (routings[round].is_active(static_cast<int>(r))) {
        EXPECT_FALSE(a.y.empty()) << where;
        EXPECT_FALSE(a.recv_x.empty()) << where;
      }
    }
}

}  // namespace

TEST(EpHostBackendFused, FusedCallsGiveTheSameBitsAsSplitCalls) {
  const int R = 3, T = 12, H = 512, K = 4, E = 2;
  const Shape s{R, T, H, K, E};
  const Routing routings[] = {Routing::all(R), Routing{R, {1, 0, 1}}, Routing::all(R)};
  for (Format f : {Format::kFP8, Format::kBF16}) {
    RoundInputs inputs;
    std::mt19937 rng(f == Format::kFP8 ? 21 : 22);
    for (int round = 0; round < 3; ++round) {
      inputs.emplace_back();
      for (int r = 0; r < R; ++r) inputs.back().push_back(make_input(s, R, r, T, rng, true));
    }
    const auto split = run_split(s, f, routings, inputs, InProcessFabric::Writes::kMapped);
    const std::pair<const char*, PerRound> others[] = {
        {"fused", run_fused(s, f, routings, inputs, false)},
        {"fused, rows read in the region", run_fused(s, f, routings, inputs, true)},
        {"split, every write a put", run_split(s, f, routings, inputs, InProcessFabric::Writes::kPutOnly)}};
    for (const auto& [what, other] : others) expect_same_bits(split, other, what, f, routings);
  }
}

// Elastic expansion: ranks 0 and 1 run two calls, then rank 2 joins with a fresh
// backend. Without an agreed epoch the old ranks wait for an epoch the newcomer never
// sends (reported as a time-out naming it); after set_epoch(phase << 32) on every rank
// the three-rank call succeeds.
TEST(EpHostBackendElastic, JoiningRankNeedsAnAgreedEpoch) {
  const Shape s{3, 8, 2048, 2, 1};
  InProcessFabric fabric(3, region_bytes(s));
  std::vector<std::unique_ptr<HostBackend>> be;
  for (int r = 0; r < 2; ++r) be.push_back(std::make_unique<HostBackend>(s, fabric.transport(r), 200ms));
  std::vector<DispatchBuffers> out;
  for (int r = 0; r < 3; ++r) out.emplace_back(s, Format::kFP8);
  std::vector<uint16_t> x(8 * 2048, float_to_bf16(1.0f)), y(8 * 2048);
  std::vector<uint16_t> eo(recv_rows(s) * 2048, float_to_bf16(1.0f));
  std::vector<int64_t> two = {0, 1, 1, 0, 0, -1, 1, -1, 0, 1, 1, 0, 0, 1, -1, -1};
  std::vector<float> w(16, 0.5f);
  const Routing phase0{3, {1, 1, 0}};  // experts of rank 2 exist but are masked
  for (int it = 0; it < 2; ++it) {
    for (int r = 0; r < 2; ++r) be[r]->dispatch_send(x.data(), two.data(), 8, phase0, Format::kFP8);
    for (int r = 0; r < 2; ++r) be[r]->dispatch_recv(out[r].view());
    for (int r = 0; r < 2; ++r) be[r]->combine_send(eo.data(), out[r].view());
    for (int r = 0; r < 2; ++r) be[r]->combine_recv(two.data(), w.data(), 8, y.data());
  }
  be.push_back(std::make_unique<HostBackend>(s, fabric.transport(2), 200ms));  // joins, epoch 0
  std::vector<int64_t> three = {0, 2, 1, 2, 2, 0, 1, -1, 0, 1, 2, 1, 0, 2, -1, 2};
  const Routing phase1 = Routing::all(3);
  for (int r = 0; r < 3; ++r) be[r]->dispatch_send(x.data(), three.data(), 8, phase1, Format::kFP8);
  try {
    be[0]->dispatch_recv(out[0].view());
    FAIL() << "expected a time-out: the newcomer's epoch is behind";
  } catch (const PeerTimeoutError& e) {
    EXPECT_EQ(e.ranks(), std::vector<int>{2});
  }
  for (int r = 0; r < 3; ++r) be[r]->set_epoch(uint64_t{1} << 32);
  for (int r = 0; r < 3; ++r) be[r]->dispatch_send(x.data(), three.data(), 8, phase1, Format::kFP8);
  for (int r = 0; r < 3; ++r) ASSERT_NO_THROW(be[r]->dispatch_recv(out[r].view()));
  for (int r = 0; r < 3; ++r) {
    int want = 0;
    for (int rr = 0; rr < 3; ++rr)
      for (auto g : three) want += g == r ? 1 : 0;
    EXPECT_EQ(out[r].recv_count[0], want) << r;
  }
  for (int r = 0; r < 3; ++r) be[r]->combine_send(eo.data(), out[r].view());
  for (int r = 0; r < 3; ++r) {
    std::fill(y.begin(), y.end(), 0xFFFF);
    ASSERT_NO_THROW(be[r]->combine_recv(three.data(), w.data(), 8, y.data()));
    for (int i = 0; i < 8; ++i) {
      float ws = 0;
      for (int k = 0; k < 2; ++k) ws += three[i * 2 + k] >= 0 ? 0.5f : 0.0f;
      EXPECT_EQ(bf16_to_float(y[i * 2048]), ws) << r << " " << i;
    }
  }
}

// ---- Elastic: a rank's process dies mid-phase and is replaced (in-process fabric) ----

#include "elastic_checks.hpp"

namespace {

// One checked dispatch + combine round from one thread (split calls) on the ranks that
// are active in `routing`; be[r] == nullptr for ranks without a backend.
void checked_round(const Shape& s, std::vector<std::unique_ptr<HostBackend>>& be, const Routing& routing, int round) {
  namespace et = ep_elastic_test;
  const int n = routing.num_ranks;
  std::vector<et::Input> in;
  for (int r = 0; r < n; ++r) in.push_back(et::make_input(s, n, r, 31, round));
  std::vector<DispatchBuffers> out;
  for (int r = 0; r < n; ++r) out.emplace_back(s, Format::kFP8);
  for (int r = 0; r < n; ++r)
    if (routing.is_active(r))
      be[r]->dispatch_send(in[r].x.data(), in[r].topk_idx.data(), s.max_tokens, routing, Format::kFP8);
  std::vector<std::vector<uint16_t>> eo(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    if (routing.is_active(r)) {
      out[r].poison();
      be[r]->dispatch_recv(out[r].view());
      eo[r] = et::check_dispatch(s, r, routing, in, out[r]);
    }
  for (int r = 0; r < n; ++r)
    if (routing.is_active(r)) be[r]->combine_send(eo[r].data(), out[r].view());
  for (int r = 0; r < n; ++r)
    if (routing.is_active(r)) {
      std::vector<uint16_t> y(static_cast<std::size_t>(s.max_tokens) * s.hidden, 0xFFFF);
      be[r]->combine_recv(in[r].topk_idx.data(), in[r].weights.data(), s.max_tokens, y.data());
      et::check_combine(s, r, routing, in[r], y);
    }
}

}  // namespace

// Rank 2 dies after dispatch. The survivors' combine names it at once although their
// timeout is 10 minutes (the ctest TIMEOUT of this binary is the guard: a wait for the
// deadline would fail the test), they mask it and go on, then a replacement process for
// rank 2 joins with a fresh region and an agreed epoch. Every round is fully checked.
TEST(EpHostBackendElastic, KilledRankIsReportedAtOnceMaskedThenReplaced) {
  const Shape s{3, 16, 2048, 4, 2};
  const auto forever = std::chrono::minutes(10);
  InProcessFabric fabric(3, region_bytes(s));
  std::vector<std::unique_ptr<HostBackend>> be;
  for (int r = 0; r < 3; ++r) be.push_back(std::make_unique<HostBackend>(s, fabric.transport(r), forever));
  const Routing all = Routing::all(3);
  ASSERT_NO_THROW(checked_round(s, be, all, 0));

  // Mid-phase: everyone dispatches, then rank 2's process dies before combining.
  auto in = ep_elastic_test::make_input(s, 3, 0, 31, 1);
  std::vector<DispatchBuffers> out;
  for (int r = 0; r < 3; ++r) out.emplace_back(s, Format::kFP8);
  for (int r = 0; r < 3; ++r) be[r]->dispatch_send(in.x.data(), in.topk_idx.data(), s.max_tokens, all, Format::kFP8);
  for (int r = 0; r < 3; ++r) be[r]->dispatch_recv(out[r].view());
  fabric.kill(2);
  std::vector<uint16_t> eo(recv_rows(s) * s.hidden, 0), y(static_cast<std::size_t>(s.max_tokens) * s.hidden);
  for (int r = 0; r < 2; ++r) {
    try {
      be[r]->combine_send(eo.data(), out[r].view());
      FAIL() << "rank " << r << ": expected PeerFailureError for the writes to rank 2";
    } catch (const PeerFailureError& e) {
      EXPECT_EQ(e.ranks(), std::vector<int>{2}) << e.what();
    }
  }
  // The survivors signalled each other despite the failure: each waits only for rank 2,
  // which is known dead, so the 10-minute wait ends at once naming exactly rank 2.
  for (int r = 0; r < 2; ++r) {
    try {
      be[r]->combine_recv(in.topk_idx.data(), in.weights.data(), s.max_tokens, y.data());
      FAIL() << "rank " << r << ": expected PeerFailureError naming rank 2";
    } catch (const PeerFailureError& e) {
      EXPECT_EQ(e.ranks(), std::vector<int>{2}) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank(s) 2"), std::string::npos) << e.what();
    }
  }
  // Once a missing rank is known dead the call cannot complete: the wait ends at once
  // even though rank 1, alive, never writes this value (it may have left the call to
  // agree on the failure; see ASurvivorThatLeftTheCallIsNotBlamed).
  const RegionLayout l = region_layout(s);
  const int both[] = {1, 2};
  const auto before = Clock::now();
  EXPECT_EQ(fabric.transport(0).wait_signals(both, l.dispatch_signals, ~uint64_t{0}, Clock::now() + forever),
            (std::vector<int>{1, 2}));
  EXPECT_LT(Clock::now() - before, std::chrono::minutes(1));
  EXPECT_TRUE(fabric.transport(0).known_failed(2));
  EXPECT_FALSE(fabric.transport(0).known_failed(1));

  // Survivors mask rank 2 (its region, a witness, must stay untouched) and go on.
  auto dead_region = fabric.region(2);
  std::memset(dead_region.data(), 0x5A, dead_region.size());
  const Routing masked{3, {1, 1, 0}};
  for (int r = 0; r < 2; ++r) be[r]->set_epoch(uint64_t{1} << 32);
  ASSERT_NO_THROW(checked_round(s, be, masked, 2));
  ASSERT_NO_THROW(checked_round(s, be, masked, 3));
  for (std::size_t i = 0; i < dead_region.size(); ++i) ASSERT_EQ(dead_region[i], std::byte{0x5A}) << i;

  // Rank 2's replacement: a fresh (zeroed) region and backend; every rank agrees on the
  // next phase's epoch.
  std::memset(dead_region.data(), 0, dead_region.size());
  fabric.revive(2);
  be[2] = std::make_unique<HostBackend>(s, fabric.transport(2), forever);
  for (int r = 0; r < 3; ++r) be[r]->set_epoch(uint64_t{2} << 32);
  ASSERT_NO_THROW(checked_round(s, be, all, 4));
  ASSERT_NO_THROW(checked_round(s, be, all, 5));
}

namespace {

// Three host backends on one fabric, rank 2 already dead, and rank 0's dispatch outputs.
// Their 10-minute timeout makes a wait for the deadline fail the test (the binary's ctest
// TIMEOUT).
struct RankTwoDead {
  RankTwoDead() {
    for (int r = 0; r < 3; ++r)
      be.push_back(std::make_unique<HostBackend>(s, fabric.transport(r), std::chrono::minutes(10)));
    fabric.kill(2);
  }
  Shape s{3, 8, 2048, 2, 1};
  InProcessFabric fabric{3, region_bytes(s)};
  std::vector<std::unique_ptr<HostBackend>> be;
  DispatchBuffers out{s, Format::kFP8};
};

// Rank 0's receive fails at once naming rank 2 alone, whatever the other live rank did.
void expect_recv_blames_only_rank_2(RankTwoDead& job) {
  try {
    job.be[0]->dispatch_recv(job.out.view());
    FAIL() << "expected PeerFailureError";
  } catch (const PeerFailureError& e) {
    EXPECT_EQ(e.ranks(), std::vector<int>{2}) << e.what();
  } catch (const std::exception& e) {
    FAIL() << "expected PeerFailureError naming rank 2, got: " << e.what();
  }
}

}  // namespace

// A send to a dead rank still signals the live ranks, so their wait names only the dead
// rank, never the sender (dispatch side).
TEST(EpHostBackendElastic, DispatchToDeadRankStillSignalsTheOthers) {
  RankTwoDead job;
  const auto in = ep_elastic_test::make_input(job.s, 3, 0, 7, 0);
  for (int r = 0; r < 2; ++r) {
    try {
      job.be[r]->dispatch_send(in.x.data(), in.topk_idx.data(), job.s.max_tokens, Routing::all(3), Format::kFP8);
      FAIL() << "expected PeerFailureError";
    } catch (const PeerFailureError& e) {
      EXPECT_EQ(e.ranks(), std::vector<int>{2});
    }
  }
  expect_recv_blames_only_rank_2(job);
}

// Two survivors may see one death an iteration apart: rank 1 saw rank 2 die after its
// last call and left for the failure agreement, so it never signals rank 0 in the next
// call. Rank 0 must not wait for rank 1 to its deadline and then blame it (a live rank
// dropped from the job): once rank 2 is known dead its wait ends at once and names only
// rank 2.
TEST(EpHostBackendElastic, ASurvivorThatLeftTheCallIsNotBlamed) {
  RankTwoDead job;
  const auto in = ep_elastic_test::make_input(job.s, 3, 0, 11, 0);
  // Only rank 0 makes the call: rank 1 has left it (it is in the agreement, alive).
  EXPECT_THROW(
      job.be[0]->dispatch_send(in.x.data(), in.topk_idx.data(), job.s.max_tokens, Routing::all(3), Format::kFP8),
      PeerFailureError);
  const auto before = Clock::now();
  expect_recv_blames_only_rank_2(job);
  EXPECT_LT(Clock::now() - before, std::chrono::minutes(1));
  EXPECT_FALSE(job.fabric.transport(0).known_failed(1));
}
