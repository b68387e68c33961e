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
#include <optional>
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

/// Iteration `it` of one rank: random routing, dispatch, every received row checked,
/// combine. The combined tokens' difference from the reference (calc_diff), or nothing when
/// the rank sits the iteration out.
std::optional<double> checked_iteration(int rank, int n, int it, const Shape& s, HostBackend& be, DispatchBuffers& out,
                                        std::mt19937& rng) {
  const int T = s.max_tokens, H = s.hidden, K = s.topk, E = s.experts_per_rank;
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  // iteration 3: rank 2 is masked out (it sits the call out)
  Routing routing = it == 3 ? Routing{n, {1, 1, 0}} : Routing::all(n);
  if (!routing.is_active(rank)) return std::nullopt;
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
  // Odd iterations read the rows where the peers stored them (region_rows: no copy).
  DispatchOutput view = out.view();
  if (it % 2 == 1) {
    const RegionRows rows = be.region_rows(Format::kFP8);
    view.recv_x = rows.recv_x;
    view.recv_scales = rows.recv_scales;
  }
  const auto* recv_x = static_cast<const uint8_t*>(view.recv_x);
  be.dispatch(x.data(), idx.data(), T, routing, Format::kFP8, view);
  std::vector<uint16_t> eo(recv_rows(s) * H, 0xFFFF);
  for (int e = 0; e < E; ++e)
    for (int src = 0; src < s.max_ranks; ++src)
      for (int j = 0; j < out.layout_count[e * s.max_ranks + src]; ++j) {
        const std::size_t row = (static_cast<std::size_t>(e) * s.max_ranks + src) * T + j;
        for (int c = 0; c < H; ++c) {
          eo[row * H + c] =
              float_to_bf16(dequantize_fp8(recv_x[row * H + c], view.recv_scales[row * (H / 128) + c / 128]));
          const float want = c >= H - 128 ? float(out.recv_src_token[row]) : float(src - 128);
          if (bf16_to_float(eo[row * H + c]) != want) throw hyrun::Error("received row is not intact");
        }
      }
  std::vector<uint16_t> y(static_cast<std::size_t>(T) * H, 0xFFFF);
  be.combine(eo.data(), view, idx.data(), w.data(), T, y.data());
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
  return calc_diff(a, b);
}

/// Closes every endpoint (forced), progressing `worker` until each close is done.
void close_endpoints(const std::vector<ucp_ep_h>& eps, ucp_worker_h worker) {
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
}

void rank_main(int rank, int n, Collective& coll, const Shape& s, std::string& error, double& worst,
               int& timeouts_seen) {
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
    const int T = s.max_tokens, H = s.hidden, K = s.topk;
    std::mt19937 rng(77 + rank);
    for (int it = 0; it < 4; ++it)
      if (const auto diff = checked_iteration(rank, n, it, s, be, out, rng)) worst = std::max(worst, *diff);
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
  close_endpoints(eps, worker);
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
  for (int r = 0; r < n; ++r) th.emplace_back([&, r] { rank_main(r, n, coll, s, errors[r], worst[r], timeouts[r]); });
  for (auto& t : th) t.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_LT(worst[r], 9e-4) << "rank " << r;
  }
  EXPECT_EQ(timeouts[0], 1);
  EXPECT_EQ(timeouts[1], 1);
}

// ---- Elastic: deferred attachment, a rank's "process" dies and is replaced ----
//
// Each rank is a thread with its own UCP context and worker (its "process"). Peers are
// attached with descriptors (no collective construction). Rank 2's process dies after
// two rounds: the survivors learn it from peer_failed (what World's endpoint error
// callback provides in a real job), get PeerFailureError naming rank 2 at once although
// their timeout is 10 minutes (this binary's ctest TIMEOUT is the guard), detach it,
// mask it and go on. Then a new process for rank 2 (new worker, new region) connects,
// the survivors replace their endpoint to it and attach its new descriptor, and the full
// world runs again. Every round checks every output element (elastic_checks.hpp).
#include "elastic_checks.hpp"

namespace {

// One "process": UCP context + worker + endpoints (force-closed on destruction).
class UcpProcess {
 public:
  /// `tls`: UCX_TLS for this context (nullptr: the environment's).
  explicit UcpProcess(int n, const char* tls = nullptr) : eps_(static_cast<std::size_t>(n), nullptr) {
    ucp_params_t up{};
    up.field_mask = UCP_PARAM_FIELD_FEATURES;
    up.features = UCP_FEATURE_RMA;
    ucp_config_t* cfg = nullptr;
    if (ucp_config_read(nullptr, nullptr, &cfg) != UCS_OK) throw hyrun::Error("ucp_config_read failed");
    if (tls != nullptr && ucp_config_modify(cfg, "TLS", tls) != UCS_OK) {
      ucp_config_release(cfg);
      throw hyrun::Error(std::string("ucp_config_modify TLS=") + tls + " failed");
    }
    ucs_status_t st = ucp_init(&up, cfg, &ctx_);
    ucp_config_release(cfg);
    if (st != UCS_OK) throw hyrun::Error(std::string("ucp_init: ") + ucs_status_string(st));
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    st = ucp_worker_create(ctx_, &wp, &worker_);
    if (st != UCS_OK) {
      ucp_cleanup(ctx_);
      throw hyrun::Error(std::string("ucp_worker_create: ") + ucs_status_string(st));
    }
  }
  ~UcpProcess() {
    for (int p = 0; p < static_cast<int>(eps_.size()); ++p) close(p);
    ucp_worker_destroy(worker_);
    ucp_cleanup(ctx_);
  }
  UcpProcess(const UcpProcess&) = delete;
  UcpProcess& operator=(const UcpProcess&) = delete;
  ucp_context_h context() const { return ctx_; }
  ucp_worker_h worker() const { return worker_; }
  ucp_ep_h endpoint(int p) const { return eps_[p]; }
  std::vector<std::byte> address() const {
    ucp_address_t* a = nullptr;
    std::size_t len = 0;
    if (ucp_worker_get_address(worker_, &a, &len) != UCS_OK) throw hyrun::Error("ucp_worker_get_address failed");
    std::vector<std::byte> v(reinterpret_cast<std::byte*>(a), reinterpret_cast<std::byte*>(a) + len);
    ucp_worker_release_address(worker_, a);
    return v;
  }
  /// World::replace_peer's stand-in: force-closes the old endpoint, connects to `address`.
  void connect(int p, const std::vector<std::byte>& address) {
    close(p);
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep.address = reinterpret_cast<const ucp_address_t*>(address.data());
    if (ucp_ep_create(worker_, &ep, &eps_[p]) != UCS_OK) throw hyrun::Error("ucp_ep_create failed");
  }
  void close(int p) {
    if (!eps_[p]) return;
    ucp_request_param_t prm{};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void* req = ucp_ep_close_nbx(eps_[p], &prm);
    if (UCS_PTR_IS_PTR(req)) {
      while (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_worker_progress(worker_);
      ucp_request_free(req);
    }
    eps_[p] = nullptr;
  }

 private:
  ucp_context_h ctx_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<ucp_ep_h> eps_;
};

// One blocking dispatch + combine of rank `me`, every output element checked.
void checked_round(const Shape& s, HostBackend& be, int me, const Routing& routing, int round) {
  namespace et = ep_elastic_test;
  std::vector<et::Input> in;
  for (int r = 0; r < routing.num_ranks; ++r) in.push_back(et::make_input(s, routing.num_ranks, r, 99, round));
  DispatchBuffers out(s, Format::kFP8);
  out.poison();
  be.dispatch(in[me].x.data(), in[me].topk_idx.data(), s.max_tokens, routing, Format::kFP8, out.view());
  const auto eo = et::check_dispatch(s, me, routing, in, out);
  std::vector<uint16_t> y(static_cast<std::size_t>(s.max_tokens) * s.hidden, 0xFFFF);
  be.combine(eo.data(), out.view(), in[me].topk_idx.data(), in[me].weights.data(), s.max_tokens, y.data());
  et::check_combine(s, me, routing, in[me], y);
}

constexpr int kVictim = 2;

struct ElasticResult {
  std::string error;
  int failures_named_victim = 0;  // PeerFailureErrors naming exactly {kVictim}
  int rounds_checked = 0;
};

/// A survivor sees rank 2 die: the dispatch that still routes to it reports it, writes to it
/// after it was detached are not issued, then rounds without it under a new epoch.
void survive_victim(int me, int n, const Shape& s, HostBackend& be, UcxTransport& tx, ElasticResult& res) {
  const Routing all = Routing::all(n);
  // Mid-phase: this dispatch still routes to rank 2. The send reports it (and still
  // signals the other survivor); the wait for rank 2 ends at once, not in 10 minutes.
  auto in = ep_elastic_test::make_input(s, n, me, 99, 2);
  DispatchBuffers out(s, Format::kFP8);
  try {
    be.dispatch_send(in.x.data(), in.topk_idx.data(), s.max_tokens, all, Format::kFP8);
  } catch (const PeerFailureError& e) {
    if (e.ranks() == std::vector<int>{kVictim}) ++res.failures_named_victim;
  }
  try {
    be.dispatch_recv(out.view());
  } catch (const PeerFailureError& e) {
    if (e.ranks() == std::vector<int>{kVictim}) ++res.failures_named_victim;
  }
  // Forget it: writes to a detached peer are not issued and reported by flush().
  tx.detach_peer(kVictim);
  const uint64_t word = 1;
  tx.put(kVictim, 0, &word, 8);
  try {
    tx.flush();
  } catch (const PeerFailureError& e) {
    if (e.ranks() == std::vector<int>{kVictim}) ++res.failures_named_victim;
  }
  // Mask and go on, with an agreed new epoch.
  std::vector<uint8_t> act(static_cast<std::size_t>(n), 1);
  act[kVictim] = 0;
  const Routing masked{n, act};
  be.set_epoch(uint64_t{1} << 32);
  for (int round = 3; round < 5; ++round, ++res.rounds_checked) checked_round(s, be, me, masked, round);
}

void elastic_rank(int me, int n, Collective& coll, const Shape& s, std::vector<std::atomic<bool>>& failed_marks,
                  ElasticResult& res) {
  const auto forever = std::chrono::minutes(10);
  auto failed = [&](int observer, int p) -> std::atomic<bool>& { return failed_marks[observer * n + p]; };
  auto sync = [&](ucp_worker_h w) { coll.allgatherv(me, {}, w); };
  std::unique_ptr<UcpProcess> proc;
  try {
    // ---- start of the job: connect, map without a collective, attach by descriptors
    proc = std::make_unique<UcpProcess>(n);
    auto addrs = coll.allgatherv(me, proc->address(), proc->worker());
    for (int p = 0; p < n; ++p)
      if (p != me) proc->connect(p, addrs[p]);
    auto start_transport = [&] {
      UcxBootstrap boot;
      boot.rank = me;
      boot.size = n;
      boot.context = proc->context();
      boot.worker = proc->worker();
      boot.endpoint = [&](int p) { return proc->endpoint(p); };  // the current endpoint
      boot.peer_failed = [&, me](int p) { return failed(me, p).load(); };
      auto tx = std::make_unique<UcxTransport>(boot, nullptr, region_bytes(s), forever, PeerAttach::kDeferred);
      if (tx->attached((me + 1) % n)) throw hyrun::Error("deferred transport attached a peer by itself");
      return tx;
    };
    auto tx = start_transport();
    auto descs = coll.allgatherv(me, tx->local_descriptor(), proc->worker());
    for (int p = 0; p < n; ++p)
      if (p != me) tx->attach_peer(p, descs[p]);
    auto be = std::make_unique<HostBackend>(s, *tx, forever);
    const Routing all = Routing::all(n);
    for (int round = 0; round < 2; ++round, ++res.rounds_checked) checked_round(s, *be, me, all, round);
    sync(proc->worker());

    // ---- rank 2's process dies
    if (me == kVictim) {
      be.reset();
      tx.reset();
      proc.reset();
      sync(nullptr);  // dead; the survivors now learn about it
      sync(nullptr);  // survivors done with the masked phase
    } else {
      sync(proc->worker());
      failed(me, kVictim) = true;  // World's endpoint error callback, in a real job
      survive_victim(me, n, s, *be, *tx, res);
      sync(proc->worker());
    }

    // ---- rank 2's new process joins again (incarnation 1)
    if (me == kVictim) {
      proc = std::make_unique<UcpProcess>(n);
      tx = start_transport();
    }
    addrs = coll.allgatherv(me, proc->address(), proc->worker());  // stand-in for accept_rejoins
    if (me == kVictim) {
      for (int p = 0; p < n; ++p)
        if (p != me) proc->connect(p, addrs[p]);
    } else {
      proc->connect(kVictim, addrs[kVictim]);  // World::replace_peer
      failed(me, kVictim) = false;             // replace_peer clears the mark
    }
    descs = coll.allgatherv(me, tx->local_descriptor(), proc->worker());
    if (me == kVictim) {
      for (int p = 0; p < n; ++p)
        if (p != me) tx->attach_peer(p, descs[p]);
      be = std::make_unique<HostBackend>(s, *tx, forever);
    } else {
      tx->attach_peer(kVictim, descs[kVictim]);  // unpacked on the new endpoint
    }
    be->set_epoch(uint64_t{2} << 32);
    for (int round = 5; round < 8; ++round, ++res.rounds_checked) checked_round(s, *be, me, all, round);
    sync(proc->worker());  // everyone done with puts before teardown
    be.reset();
    tx.reset();
  } catch (const std::exception& e) {
    res.error = e.what();
  }
  if (proc)
    sync(proc->worker());
  else
    sync(nullptr);
  proc.reset();
}

}  // namespace

TEST(EpUcxTransportElastic, DeferredAttachFailedPeerAndReplacement) {
  const int n = 3;
  const Shape s{n, 16, 2048, 4, 2};
  Collective coll(n);
  std::vector<std::atomic<bool>> failed(static_cast<std::size_t>(n * n));
  std::vector<ElasticResult> res(n);
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r) th.emplace_back([&, r] { elastic_rank(r, n, coll, s, failed, res[r]); });
  for (auto& t : th) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(res[r].error, "") << "rank " << r;
  for (int r = 0; r < n; ++r)
    if (r != kVictim) {
      EXPECT_EQ(res[r].failures_named_victim, 3) << "rank " << r;
      EXPECT_EQ(res[r].rounds_checked, 2 + 2 + 3) << "rank " << r;
    } else {
      EXPECT_EQ(res[r].rounds_checked, 2 + 3);
    }
}

TEST(EpUcxTransportElastic, BadDescriptorsAreRejected) {
  UcpProcess proc(2);
  UcxBootstrap boot;
  boot.rank = 0;
  boot.size = 2;
  boot.context = proc.context();
  boot.worker = proc.worker();
  boot.endpoint = [&](int p) { return proc.endpoint(p); };
  // deferred construction needs no allgatherv; the collective one does
  EXPECT_THROW(UcxTransport(boot, nullptr, 4096, 1000ms), hyrun::UsageError);
  UcxTransport tx(boot, nullptr, 4096, 1000ms, PeerAttach::kDeferred);
  const auto d = tx.local_descriptor();
  ASSERT_GT(d.size(), 16u);
  uint64_t addr = 0, len = 0;
  std::memcpy(&addr, d.data(), 8);
  std::memcpy(&len, d.data() + 8, 8);
  EXPECT_EQ(addr, reinterpret_cast<uintptr_t>(tx.region().data()));
  EXPECT_EQ(len, 4096u);
  EXPECT_THROW(tx.attach_peer(1, std::span<const std::byte>(d.data(), 16)), hyrun::UsageError);
  EXPECT_THROW(tx.attach_peer(2, d), hyrun::UsageError);
  EXPECT_THROW(tx.detach_peer(0), hyrun::UsageError);
  EXPECT_FALSE(tx.attached(1));
  // never attached: the write is not issued, flush names the peer
  const uint64_t w = 7;
  tx.put(1, 0, &w, 8);
  try {
    tx.flush();
    FAIL() << "expected PeerFailureError";
  } catch (const PeerFailureError& e) {
    EXPECT_EQ(e.ranks(), std::vector<int>{1});
    EXPECT_NE(std::string(e.what()).find("not attached"), std::string::npos) << e.what();
  }
  // self writes need no attachment
  tx.put(0, 8, &w, 8);
  EXPECT_NO_THROW(tx.flush());
  uint64_t got = 0;
  std::memcpy(&got, tx.region().data() + 8, 8);
  EXPECT_EQ(got, 7u);
}

// ---- Shared memory: a peer's region is mapped, and the backend stores into it ----
//
// With UCX's shared-memory transports the transport allocates its region through UCX,
// so that a peer on the node maps it (ucp_rkey_ptr) and writes it with plain stores
// instead of a system call per put. Two ranks as threads: rank 0 stores a value through
// mapped(), flushes and signals; rank 1 sees the value once the signal arrives. Over tcp
// nothing is mapped (puts are used), and a detached peer is never mapped.
namespace {
struct MappedResult {
  std::string error;
  bool peer_mapped = false, self_is_region = false, detached_unmapped = false;
  uint64_t seen = 0;
};
void mapped_rank(int me, const char* tls, Collective& coll, MappedResult& res) {
  constexpr std::size_t kBytes = 4096, kDataOffset = 64;
  constexpr uint64_t kValue = 0x1122334455667788ull;
  try {
    UcpProcess proc(2, tls);
    auto addrs = coll.allgatherv(me, proc.address(), proc.worker());
    proc.connect(1 - me, addrs[1 - me]);
    UcxBootstrap boot;
    boot.rank = me;
    boot.size = 2;
    boot.context = proc.context();
    boot.worker = proc.worker();
    boot.endpoint = [&](int p) { return proc.endpoint(p); };
    boot.allgatherv = [&](std::span<const std::byte> mine) { return coll.allgatherv(me, mine, proc.worker()); };
    UcxTransport tx(boot, nullptr, kBytes, 10000ms);
    res.self_is_region = tx.mapped(me, kDataOffset, 8) == tx.region().data() + kDataOffset;
    if (me == 0) {
      std::byte* p = tx.mapped(1, kDataOffset, 8);
      res.peer_mapped = p != nullptr;
      if (p != nullptr)
        std::memcpy(p, &kValue, 8);
      else
        tx.put(1, kDataOffset, &kValue, 8);
      tx.flush();
      tx.signal(1, 0, 1);  // rank 0's word of rank 1's signals at offset 0
      tx.flush();
    } else {
      const int from[] = {0};
      if (!tx.wait_signals(from, 0, 1, Clock::now() + 10s).empty()) throw hyrun::Error("no signal from rank 0");
      std::memcpy(&res.seen, tx.region().data() + kDataOffset, 8);
    }
    coll.allgatherv(me, {}, proc.worker());  // both done before either region goes away
    tx.detach_peer(1 - me);
    res.detached_unmapped = tx.mapped(1 - me, kDataOffset, 8) == nullptr;
    coll.allgatherv(me, {}, proc.worker());
  } catch (const std::exception& e) {
    res.error = e.what();
  }
}
std::vector<MappedResult> run_mapped(const char* tls) {
  Collective coll(2);
  std::vector<MappedResult> res(2);
  std::vector<std::thread> th;
  for (int r = 0; r < 2; ++r) th.emplace_back([&, r] { mapped_rank(r, tls, coll, res[r]); });
  for (auto& t : th) t.join();
  return res;
}
}  // namespace

TEST(EpUcxTransport, SharedMemoryPeerRegionIsMappedAndStoresArrive) {
  const auto res = run_mapped("shm,self");
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(res[r].error, "") << "rank " << r;
    EXPECT_TRUE(res[r].self_is_region) << "rank " << r;
    EXPECT_TRUE(res[r].detached_unmapped) << "rank " << r;
  }
  EXPECT_TRUE(res[0].peer_mapped) << "with UCX_TLS=shm,self the peer's region should be mapped (posix/sysv)";
  EXPECT_EQ(res[1].seen, 0x1122334455667788ull);
}

TEST(EpUcxTransport, TcpPeerRegionIsNotMappedAndPutsArrive) {
  const auto res = run_mapped("tcp");
  for (int r = 0; r < 2; ++r) ASSERT_EQ(res[r].error, "") << "rank " << r;
  EXPECT_FALSE(res[0].peer_mapped);
  EXPECT_EQ(res[1].seen, 0x1122334455667788ull);
}
