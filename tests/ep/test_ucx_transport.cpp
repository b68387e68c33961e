// UcxTransport with real UCX: three simulated ranks in one process, one thread each, each
// with its own UCP context and worker, connected by worker addresses (a stand-in for
// hyrun::World's bootstrap, through UcxBootstrap). Runs the host backend over it:
// one-sided puts into ucp_mem_map'ed regions, flush, signal words, bounded waits.
#include <gtest/gtest.h>
#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "hyrun/ep/host_backend.hpp"
#include "hyrun/ep/ucx_transport.hpp"

using namespace hyrun::ep;
using namespace std::chrono_literals;

namespace {

// In-process allgather among threads; waiting threads keep their UCP worker progressing.
class Collective {
 public:
  explicit Collective(int n) : n_(n), data_(static_cast<std::size_t>(n)) {}
  std::vector<std::vector<std::byte>> allgatherv(int rank, std::span<const std::byte> mine, ucp_worker_h w) {
    uint64_t gen;
    {
      std::lock_guard lk(mu_);
      gen = generation_;
      data_[rank].assign(mine.begin(), mine.end());
      if (++arrived_ == n_) {
        result_ = data_;
        arrived_ = 0;
        ++generation_;
      }
    }
    for (;;) {
      {
        std::lock_guard lk(mu_);
        if (generation_ != gen) return result_;
      }
      if (w) ucp_worker_progress(w);
      std::this_thread::yield();
    }
  }

 private:
  int n_;
  std::mutex mu_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::vector<std::vector<std::byte>> data_, result_;
};

double calc_diff(const std::vector<double>& x, const std::vector<double>& y) {
  double xy = 0, s = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    xy += (x[i] + 1) * (y[i] + 1);
    s += (x[i] + 1) * (x[i] + 1) + (y[i] + 1) * (y[i] + 1);
  }
  return 1 - 2 * xy / s;
}

void rank_main(int rank, int n, Collective& coll, const Shape& s, std::string& error, double& worst, int& timeouts_seen) {
  ucp_params_t up{};
  up.field_mask = UCP_PARAM_FIELD_FEATURES;
  up.features = UCP_FEATURE_RMA;
  ucp_config_t* cfg = nullptr;
  ucp_config_read(nullptr, nullptr, &cfg);
  ucp_context_h ctx = nullptr;
  ucs_status_t st = ucp_init(&up, cfg, &ctx);
  ucp_config_release(cfg);
  if (st != UCS_OK) {
    error = std::string("ucp_init: ") + ucs_status_string(st);
    coll.allgatherv(rank, {}, nullptr);
    return;
  }
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucp_worker_h worker = nullptr;
  ucp_worker_create(ctx, &wp, &worker);
  ucp_address_t* addr = nullptr;
  std::size_t addr_len = 0;
  ucp_worker_get_address(worker, &addr, &addr_len);
  auto addrs = coll.allgatherv(rank, {reinterpret_cast<std::byte*>(addr), addr_len}, worker);
  ucp_worker_release_address(worker, addr);
  std::vector<ucp_ep_h> eps(static_cast<std::size_t>(n), nullptr);
  for (int p = 0; p < n; ++p) {
    if (p == rank) continue;
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep.address = reinterpret_cast<const ucp_address_t*>(addrs[p].data());
    ucp_ep_create(worker, &ep, &eps[p]);
  }
  try {
    UcxBootstrap boot;
    boot.rank = rank;
    boot.size = n;
    boot.context = ctx;
    boot.worker = worker;
    boot.endpoint = [&](int p) { return eps[p]; };
    boot.allgatherv = [&](std::span<const std::byte> mine) { return coll.allgatherv(rank, mine, worker); };
    UcxTransport tx(boot, nullptr, region_bytes(s), 10000ms);
    HostBackend be(s, tx, 10000ms);
    DispatchBuffers out(s, Format::kFP8);
    const int T = s.max_tokens, H = s.hidden, K = s.topk, E = s.experts_per_rank;
    std::mt19937 rng(77 + rank);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    for (int it = 0; it < 4; ++it) {
      // iteration 3: rank 2 is masked out (it sits the call out)
      Routing routing = it == 3 ? Routing{n, {1, 1, 0}} : Routing::all(n);
      if (!routing.is_active(rank)) continue;
      std::vector<uint16_t> x(static_cast<std::size_t>(T) * H);
      for (int i = 0; i < T; ++i)
        for (int c = 0; c < H; ++c) x[i * H + c] = float_to_bf16(c >= H - 128 ? float(i) : float(rank - 128));
      std::vector<int64_t> idx(static_cast<std::size_t>(T) * K);
      std::vector<float> w(idx.size());
      for (int i = 0; i < T; ++i) {
        std::vector<int64_t> perm(static_cast<std::size_t>(n * E));
        for (int e = 0; e < n * E; ++e) perm[e] = e;
        std::shuffle(perm.begin(), perm.end(), rng);
        for (int k = 0; k < K; ++k) {
          idx[i * K + k] = u(rng) < 0.2f ? -1 : perm[k];
          w[i * K + k] = u(rng);
        }
      }
      out.poison();
      be.dispatch(x.data(), idx.data(), T, routing, Format::kFP8, out.view());
      std::vector<uint16_t> eo(recv_rows(s) * H, 0xFFFF);
      for (int e = 0; e < E; ++e)
        for (int src = 0; src < s.max_ranks; ++src)
          for (int j = 0; j < out.layout_count[e * s.max_ranks + src]; ++j) {
            const std::size_t row = (static_cast<std::size_t>(e) * s.max_ranks + src) * T + j;
            for (int c = 0; c < H; ++c) {
              eo[row * H + c] = float_to_bf16(dequantize_fp8(out.recv_x[row * H + c], out.recv_scales[row * (H / 128) + c / 128]));
              const float want = c >= H - 128 ? float(out.recv_src_token[row]) : float(src - 128);
              if (bf16_to_float(eo[row * H + c]) != want) throw hyrun::Error("received row is not intact");
            }
          }
      std::vector<uint16_t> y(static_cast<std::size_t>(T) * H, 0xFFFF);
      be.combine(eo.data(), out.view(), idx.data(), w.data(), T, y.data());
      std::vector<double> a(y.size()), b(y.size());
      for (int i = 0; i < T; ++i) {
        double ws = 0;
        for (int k = 0; k < K; ++k)
          if (kept_expert(idx[i * K + k], E, routing) >= 0) ws += w[i * K + k];
        for (int c = 0; c < H; ++c) {
          a[i * H + c] = bf16_to_float(x[i * H + c]) * ws;
          b[i * H + c] = bf16_to_float(y[i * H + c]);
        }
      }
      worst = std::max(worst, calc_diff(a, b));
    }
    // A silent peer is reported at the deadline: ranks 0 and 1 dispatch with a short
    // timeout, rank 2 does not take part.
    if (rank < 2) {
      HostBackend quick(s, tx, 300ms);
      quick.set_epoch(be.epoch());
      std::vector<uint16_t> x(static_cast<std::size_t>(T) * H, 0);
      std::vector<int64_t> idx(static_cast<std::size_t>(T) * K, -1);
      try {
        quick.dispatch(x.data(), idx.data(), T, Routing::all(n), Format::kFP8, out.view());
      } catch (const PeerTimeoutError& e) {
        if (e.ranks() == std::vector<int>{2}) ++timeouts_seen;
      }
    }
    coll.allgatherv(rank, {}, worker);  // everyone done with puts before teardown
  } catch (const std::exception& e) {
    error = e.what();
  }
  for (auto ep : eps) {
    if (!ep) continue;
    ucp_request_param_t prm{};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void* req = ucp_ep_close_nbx(ep, &prm);
    if (UCS_PTR_IS_PTR(req)) {
      while (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_worker_progress(worker);
      ucp_request_free(req);
    }
  }
  coll.allgatherv(rank, {}, worker);
  ucp_worker_destroy(worker);
  ucp_cleanup(ctx);
}

}  // namespace

TEST(EpUcxTransport, HostBackendOverUcxThreeRanksInOneProcess) {
  const int n = 3;
  const Shape s{n, 16, 2048, 4, 2};
  Collective coll(n);
  std::vector<std::string> errors(n);
  std::vector<double> worst(n, 0);
  std::vector<int> timeouts(n, 0);
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r)
    th.emplace_back([&, r] { rank_main(r, n, coll, s, errors[r], worst[r], timeouts[r]); });
  for (auto& t : th) t.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_LT(worst[r], 9e-4) << "rank " << r;
  }
  EXPECT_EQ(timeouts[0], 1);
  EXPECT_EQ(timeouts[1], 1);
}
