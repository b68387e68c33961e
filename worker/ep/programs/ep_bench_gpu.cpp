// ep-bench-gpu: times the CUDA backend's dispatch (FP8) + combine (BF16) with CUDA events
// across the ranks of a hyrun job sharing one node's GPUs through CUDA IPC, and, in the
// same run, a device-to-device cudaMemcpy and the FP8 cast kernel alone.
//
//   hyrun -n 4 -- ep-bench-gpu [--tokens 128 --hidden 7168 --topk 8] [--kernel-only]
//
// Timing, as the reference: --warmup calls, the L2 flushed (a 256 MiB memset), a barrier,
// then --iters calls back to back; dispatch and combine are each bracketed by events
// (--kernel-only also splits each into its send and receive half). --cold-calls instead
// flushes and meets in a barrier before every call (each call then starts with a cold L2
// and all ranks start together; ranks sharing a GPU share its L2 and bandwidth); the first sample is dropped; median,
// min, max (and avg for the reference line). Bandwidth: logical bytes (layout.hpp) / time. --kernel-only: every expert
// on this rank (one simulated rank, own region only): kernel time without peer traffic. Inputs change from iteration to
// iteration (4 routings, cycled); before and after the timed loop every variant's outputs are checked against the
// reference (ep-check's checks), outside the timed region. The calls go through the EP front (Buffer). Lines: the
// reference "[rank r] Dispatch + combine bandwidth: ..." plus
// "[rank r] gpu-bench: ..." and, from rank 0, "d2d-copy: ..." and "fp8-cast: ...".
// Exit codes: 0, 1 error, 77 no CUDA device.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>

#include "bench_options.hpp"
#include "hyrun/ep/buffer.hpp"
#include "hyrun/ep/cuda_backend.hpp"
#include "hyrun/ep/cuda_memory.hpp"
#include "hyrun/ep/reference_checks.hpp"
#include "hyrun/ep/reference_inputs.hpp"
#include "hyrun/ep/report/sample_stats.hpp"
#include "hyrun/worker.hpp"
#include "tool_main.hpp"

namespace hyrun::ep::check {
namespace {

using namespace hyrun::ep::cuda;

struct Options : tools::BenchOptions {
  Options() {
    warmup = 50;
    iters = 200;
  }
  bool flush_l2 = true;
  bool cold = false;  // --cold-calls: flush and meet before every timed call
};

using Stats = report::SampleStats;  // of seconds

class Event {
 public:
  Event() { cuda_check(cudaEventCreate(&e_), "cudaEventCreate"); }
  ~Event() { cudaEventDestroy(e_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(Stream s) { cuda_check(cudaEventRecord(e_, to_cuda(s)), "cudaEventRecord"); }
  /// Seconds from `start` to this event (both completed).
  double since(const Event& start) const {
    float ms = 0;
    cuda_check(cudaEventElapsedTime(&ms, start.e_, e_), "cudaEventElapsedTime");
    return ms * 1e-3;
  }

 private:
  cudaEvent_t e_ = nullptr;
};

/// Times `op` (launches on `stream`) with events: warm-up, then samples.
template <class Op>
Stats time_op(Stream stream, int warmup, int iters, DeviceArray<uint8_t>* l2, Op op) {
  for (int i = 0; i < warmup; ++i) op();
  sync(stream);
  Event a, b;
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    if (l2) cuda_check(cudaMemsetAsync(l2->get(), i & 0xFF, l2->size(), to_cuda(stream)), "L2 flush");
    a.record(stream);
    op();
    b.record(stream);
    sync(stream);
    t.push_back(b.since(a));
  }
  return report::stats_without_first(t);
}

/// The call under test: the EP front across the ranks (CUDA IPC), or, --kernel-only, the
/// CUDA backend alone with every expert on this rank (one simulated rank, own region).
class Ep {
 public:
  Ep(World& world, const Shape& s, bool kernel_only, std::chrono::milliseconds timeout) {
    if (kernel_only) {
      region_ = std::make_unique<cuda::DeviceRegion>(s);
      alone_ = std::make_unique<cuda::CudaBackend>(s, 0, std::vector<void*>{region_->get()}, timeout);
    } else {
      buffer_ = std::make_unique<Buffer>(world, BufferOptions{s, Backend::kCudaIpc, timeout, PeerAttach::kCollective});
    }
  }
  Stream stream() const { return buffer_ ? buffer_->stream() : alone_->stream(); }
  void close_peers() {
    if (buffer_) buffer_->close_peers();
  }
  /// `between` (kernel-only): recorded between the send and the receive half.
  void dispatch(const uint16_t* x, const int64_t* idx, int n, const Routing& r, const DispatchOutput& out,
                Event* between = nullptr) {
    if (buffer_) return buffer_->launch_dispatch(x, idx, n, r, Format::kFP8, out);
    alone_->dispatch_send(x, idx, n, r, Format::kFP8);
    if (between) between->record(alone_->stream());
    alone_->dispatch_recv(out);
  }
  void combine(const uint16_t* eo, const DispatchOutput& h, const int64_t* idx, const float* w, int n, uint16_t* y,
               Event* between = nullptr) {
    if (buffer_) return buffer_->launch_combine(eo, h, idx, w, n, y);
    alone_->combine_send(eo, h);
    if (between) between->record(alone_->stream());
    alone_->combine_recv(idx, w, n, y);
  }
  void synchronize() { buffer_ ? buffer_->synchronize() : alone_->synchronize(); }

 private:
  std::unique_ptr<Buffer> buffer_;
  std::unique_ptr<cuda::DeviceRegion> region_;  // before alone_: freed after it
  std::unique_ptr<cuda::CudaBackend> alone_;
};

/// Device copies of one input variant (the routing changes from variant to variant).
struct DeviceInputs {
  DeviceInputs(const RankInputs& in, Stream s) : x(in.x.size()), idx(in.topk_idx.size()), w(in.topk_weights.size()) {
    x.upload(in.x.data(), in.x.size(), s);
    idx.upload(in.topk_idx.data(), in.topk_idx.size(), s);
    w.upload(in.topk_weights.data(), in.topk_weights.size(), s);
  }
  DeviceArray<uint16_t> x;
  DeviceArray<int64_t> idx;
  DeviceArray<float> w;
};

int run(const Options& o) {
  World world;
  const int me = world.rank(), size = world.size();
  std::string why;
  if (!select_cuda_device(world.local_rank(), &why)) {
    std::printf("ep-bench-gpu: rank %d: SKIPPED: %s\n", me, why.c_str());
    std::fflush(stdout);
    return 77;
  }
  if (!o.kernel_only && world.num_nodes() > 1)
    throw UsageError(
        "ep-bench-gpu shares GPUs through CUDA IPC: every rank must be on one node (or use --kernel-only)");
  const CaseShape c{o.tokens, o.hidden, o.topk};
  const Shape s = o.kernel_only ? Shape{1, o.tokens, o.hidden, o.topk, o.experts_per_rank * size}
                                : Shape{size, o.tokens, o.hidden, o.topk, o.experts_per_rank};
  s.validate();
  Ep ep(world, s, o.kernel_only, std::chrono::milliseconds(o.timeout_ms));
  const Stream stream = ep.stream();
  // Kernel-only: one simulated rank owning all size*E experts sees the same selections.
  const Routing routing = Routing::all(s.max_ranks);

  // Inputs that change from iteration to iteration: kVariants routings (the reference
  // inputs of cases 0..kVariants-1), cycled; each variant's outputs are checked once.
  constexpr int kVariants = 4;
  std::vector<RankInputs> host_in;
  std::vector<std::vector<RankInputs>> all_in(kVariants);
  std::vector<std::unique_ptr<DeviceInputs>> dev_in;
  for (int v = 0; v < kVariants; ++v) {
    for (int r = 0; r < size; ++r) all_in[v].push_back(make_rank_inputs(c, size, o.experts_per_rank, r, o.seed, v));
    host_in.push_back(all_in[v][static_cast<std::size_t>(me)]);
    dev_in.push_back(std::make_unique<DeviceInputs>(host_in.back(), stream));
  }
  const std::size_t T = static_cast<std::size_t>(o.tokens), H = static_cast<std::size_t>(o.hidden);
  DeviceArray<uint8_t> recv_x(recv_x_bytes(s, Format::kFP8));
  DeviceArray<float> scales(recv_scales_count(s));
  DeviceArray<int32_t> tok(recv_rows(s)), tk(recv_rows(s)),
      lay(static_cast<std::size_t>(s.experts_per_rank) * s.max_ranks),
      cnt(static_cast<std::size_t>(s.experts_per_rank));
  DeviceArray<uint16_t> expert_out(recv_rows(s) * H), y(T * H);
  expert_out.fill_bytes(0, stream);
  const DispatchOutput out{recv_x.get(), scales.get(), tok.get(), tk.get(), lay.get(), cnt.get()};
  std::unique_ptr<DeviceArray<uint8_t>> l2;
  if (o.flush_l2) l2 = std::make_unique<DeviceArray<uint8_t>>(std::size_t(256) << 20);
  sync(stream);

  // The check of one variant (outside any timed region): poisoned outputs, dispatch,
  // reference checks, identity experts, combine, reference checks. Kernel-only runs the
  // routing of one simulated rank, which the multi-rank reference does not describe.
  auto check_variant = [&](int v) {
    if (o.kernel_only) return;
    const DeviceInputs& d = *dev_in[static_cast<std::size_t>(v)];
    for (auto* a : {&tok, &tk, &lay, &cnt}) a->fill_bytes(0xFF, stream);
    recv_x.fill_bytes(0xFF, stream);
    scales.fill_bytes(0xFF, stream);
    ep.dispatch(d.x.get(), d.idx.get(), o.tokens, routing, out);
    ep.synchronize();
    DispatchBuffers host(s, Format::kFP8);
    recv_x.download(host.recv_x.data(), host.recv_x.size(), stream);
    scales.download(host.recv_scales.data(), host.recv_scales.size(), stream);
    tok.download(host.recv_src_token.data(), host.recv_src_token.size(), stream);
    tk.download(host.recv_src_topk.data(), host.recv_src_topk.size(), stream);
    lay.download(host.layout_count.data(), host.layout_count.size(), stream);
    cnt.download(host.recv_count.data(), host.recv_count.size(), stream);
    CheckReport report;
    check_dispatch(s, Format::kFP8, me, routing, all_in[static_cast<std::size_t>(v)], host, report);
    const auto identity = identity_expert_out(s, Format::kFP8, host);
    DeviceArray<uint16_t> eo(identity.size());
    eo.upload(identity.data(), identity.size(), stream);
    y.fill_bytes(0xFF, stream);
    ep.combine(eo.get(), out, d.idx.get(), d.w.get(), o.tokens, y.get());
    ep.synchronize();
    std::vector<uint16_t> hy(T * H);
    y.download(hy.data(), hy.size(), stream);
    check_combine(s, Format::kFP8, routing, host_in[static_cast<std::size_t>(v)], hy, report);
    if (!report.ok)
      throw Error(fmt::format("rank {}: outputs of input variant {} are wrong: {}", me, v,
                              report.problems.empty() ? "a check failed" : report.problems.front()));
  };

  Event e0, e1, e2, ed, ec;
  int variant = 0;
  auto dispatch = [&](Event* between = nullptr) {
    const DeviceInputs& d = *dev_in[static_cast<std::size_t>(variant)];
    ep.dispatch(d.x.get(), d.idx.get(), o.tokens, routing, out, between);
  };
  auto combine = [&](Event* between = nullptr) {
    const DeviceInputs& d = *dev_in[static_cast<std::size_t>(variant)];
    ep.combine(expert_out.get(), out, d.idx.get(), d.w.get(), o.tokens, y.get(), between);
  };
  for (int v = 0; v < kVariants; ++v) check_variant(v);
  for (int i = 0; i < o.warmup; ++i) {
    variant = i % kVariants;
    dispatch();
    combine();
  }
  ep.synchronize();
  world.barrier();
  std::vector<double> td, tc, tt, tds, tcs;
  if (o.cold) {
    for (int i = 0; i < o.iters; ++i) {
      variant = i % kVariants;
      // Every rank flushes, then all start together: ranks sharing a GPU share its L2 and
      // its memory bandwidth, so a flush inside another rank's timed call would be timed
      // as that rank's, and a rank still flushing would be timed as its peers' wait.
      if (l2) {
        cuda_check(cudaMemsetAsync(l2->get(), i & 0xFF, l2->size(), to_cuda(stream)), "L2 flush");
        sync(stream);
      }
      world.barrier();
      e0.record(stream);
      dispatch(o.kernel_only ? &ed : nullptr);
      e1.record(stream);
      combine(o.kernel_only ? &ec : nullptr);
      e2.record(stream);
      ep.synchronize();
      td.push_back(e1.since(e0));
      tc.push_back(e2.since(e1));
      tt.push_back(e2.since(e0));
      if (o.kernel_only) {
        tds.push_back(ed.since(e0));
        tcs.push_back(ec.since(e1));
      }
    }
  } else {
    // As the reference: the L2 flushed once, then the timed calls back to back, each
    // between events (the calls' own waits keep the ranks in step, as in a model's layers).
    if (l2) {
      cuda_check(cudaMemsetAsync(l2->get(), 0x5A, l2->size(), to_cuda(stream)), "L2 flush");
      sync(stream);
    }
    world.barrier();
    const std::size_t n = static_cast<std::size_t>(o.iters);
    std::vector<Event> a(n), b(n), c(n), hd(o.kernel_only ? n : 0), hc(o.kernel_only ? n : 0);
    for (std::size_t i = 0; i < n; ++i) {
      variant = static_cast<int>(i % kVariants);
      a[i].record(stream);
      dispatch(o.kernel_only ? &hd[i] : nullptr);
      b[i].record(stream);
      combine(o.kernel_only ? &hc[i] : nullptr);
      c[i].record(stream);
    }
    ep.synchronize();
    for (std::size_t i = 0; i < n; ++i) {
      td.push_back(b[i].since(a[i]));
      tc.push_back(c[i].since(b[i]));
      tt.push_back(c[i].since(a[i]));
      if (o.kernel_only) {
        tds.push_back(hd[i].since(a[i]));
        tcs.push_back(hc[i].since(b[i]));
      }
    }
  }
  world.barrier();
  // The outputs are still right after the timed loop (every variant again).
  for (int v = 0; v < kVariants; ++v) check_variant(v);
  world.barrier();
  if (!o.kernel_only)
    std::printf("[rank %d] gpu-bench: outputs of %d input variants checked before and after timing: PASS\n", me,
                kVariants);

  // Bandwidth: the selections of the variants, averaged (each is timed equally often).
  std::size_t sel_sum = 0;
  for (const auto& in : host_in)
    sel_sum += count_valid_selections(in.topk_idx.data(), o.tokens, o.topk, o.experts_per_rank, size, nullptr);
  const std::size_t sel = sel_sum / kVariants;
  const std::size_t db = dispatch_bytes(sel, o.hidden, Format::kFP8), cb = combine_bytes(sel, o.hidden);
  const Stats t = report::stats_without_first(tt), d = report::stats_without_first(td),
              cm = report::stats_without_first(tc);
  const char* mode = o.kernel_only ? "kernel-only" : "ipc";
  std::printf("[rank %d] Dispatch + combine bandwidth: %.2f GB/s, avg_t=%.2f us, min_t=%.2f us, max_t=%.2f us\n", me,
              bandwidth_gbps(db, cb, t.avg), t.avg * 1e6, t.min * 1e6, t.max * 1e6);
  std::printf("[rank %d] Dispatch bandwidth: %.2f GB/s, avg_t=%.2f us | Combine bandwidth: %.2f GB/s, avg_t=%.2f us\n",
              me, db / 1e9 / d.avg, d.avg * 1e6, cb / 1e9 / cm.avg, cm.avg * 1e6);
  std::printf(
      "[rank %d] gpu-bench: mode=%s ranks=%d selections=%zu bytes=%zu median_us=%.2f min_us=%.2f max_us=%.2f "
      "ep_gbps_median=%.2f dispatch_median_us=%.2f combine_median_us=%.2f\n",
      me, mode, size, sel, db + cb, t.median * 1e6, t.min * 1e6, t.max * 1e6, bandwidth_gbps(db, cb, t.median),
      d.median * 1e6, cm.median * 1e6);
  if (o.kernel_only) {
    // Where a call's time goes: the send half (dispatch: count, cast and write, signal;
    // combine: rows back, signal) and the receive half (dispatch: wait, check, unpack;
    // combine: wait, reduce).
    std::vector<double> tdr(td.size()), tcr(tc.size());
    for (std::size_t i = 0; i < td.size(); ++i) tdr[i] = td[i] - tds[i], tcr[i] = tc[i] - tcs[i];
    const Stats ds = report::stats_without_first(tds), cs = report::stats_without_first(tcs),
                dr = report::stats_without_first(tdr), cr = report::stats_without_first(tcr);
    std::printf(
        "[rank %d] gpu-bench halves: dispatch_send_median_us=%.2f dispatch_recv_median_us=%.2f "
        "combine_send_median_us=%.2f combine_recv_median_us=%.2f\n",
        me, ds.median * 1e6, dr.median * 1e6, cs.median * 1e6, cr.median * 1e6);
  }
  std::fflush(stdout);

  // Rank 0 alone on the GPU: the copy and cast baselines of the same run.
  world.barrier();
  if (me == 0) {
    const std::size_t bytes = db + cb;
    DeviceArray<uint8_t> src(bytes), dst(bytes);
    src.fill_bytes(1, stream);
    const Stats cp = time_op(stream, o.warmup, o.iters, l2.get(), [&] {
      cuda_check(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, to_cuda(stream)),
                 "cudaMemcpyAsync");
    });
    std::printf("d2d-copy: bytes=%zu median_us=%.2f min_us=%.2f max_us=%.2f gbps_median=%.2f (bytes copied / time)\n",
                bytes, cp.median * 1e6, cp.min * 1e6, cp.max * 1e6, bytes / 1e9 / cp.median);
    DeviceArray<uint8_t> q(T * H);
    DeviceArray<float> qs(T * (H / kScaleBlock));
    const Stats cast = time_op(stream, o.warmup, o.iters, l2.get(), [&] {
      cuda::cast_fp8(dev_in[0]->x.get(), o.tokens, o.hidden, q.get(), qs.get(), stream);
    });
    const std::size_t cast_bytes = T * (2 * H + H + H / kScaleBlock * 4);  // read bf16, write fp8 + scales
    // A copy of the cast's input size, for the same-size comparison (read + write counted).
    const std::size_t cbytes = T * 2 * H;
    const Stats cp2 = time_op(stream, o.warmup, o.iters, l2.get(), [&] {
      cuda_check(
          cudaMemcpyAsync(dst.get(), src.get(), std::min(cbytes, bytes), cudaMemcpyDeviceToDevice, to_cuda(stream)),
          "cudaMemcpyAsync");
    });
    std::printf(
        "fp8-cast: rows=%d hidden=%d median_us=%.2f min_us=%.2f max_us=%.2f rw_gbps=%.2f "
        "copy_rw_gbps=%.2f ratio=%.3f (read+write bytes / time)\n",
        o.tokens, o.hidden, cast.median * 1e6, cast.min * 1e6, cast.max * 1e6, cast_bytes / 1e9 / cast.median,
        2.0 * std::min(cbytes, bytes) / 1e9 / cp2.median,
        (cast_bytes / cast.median) / (2.0 * std::min(cbytes, bytes) / cp2.median));
    std::fflush(stdout);
  }
  // No rank frees its region (Ep's destructor) while another still maps it.
  ep.close_peers();
  world.barrier();
  return 0;
}

}  // namespace
}  // namespace hyrun::ep::check

int main(int argc, char** argv) {
  hyrun::ep::check::Options o;
  CLI::App app{"ep-bench-gpu: dispatch + combine of the CUDA EP backend timed with CUDA events"};
  hyrun::ep::tools::add_bench_options(app, o, CLI::Range(1, 32), "all experts local: kernels without peer traffic");
  app.add_flag("!--no-flush-l2", o.flush_l2,
               "do not flush the L2 (before the timed calls, or before each with --cold-calls)");
  app.add_flag("--cold-calls", o.cold,
               "flush the L2 and meet in a barrier before every timed call (default: as the reference, once before "
               "the timed calls, which then run back to back)");
  CLI11_PARSE(app, argc, argv);
  return hyrun::ep::tools::run_tool("ep-bench-gpu", [&] { return hyrun::ep::check::run(o); });
}
