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
#include "bench_results.hpp"
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

/// Inputs that change from iteration to iteration: kVariants routings (the reference
/// inputs of cases 0..kVariants-1), cycled; each variant's outputs are checked.
constexpr int kVariants = 4;

struct Variants {
  Variants(const Options& o, int size, int me, Stream stream) : all(kVariants) {
    const CaseShape c{o.tokens, o.hidden, o.topk};
    for (int v = 0; v < kVariants; ++v) {
      for (int r = 0; r < size; ++r) all[v].push_back(make_rank_inputs(c, size, o.experts_per_rank, r, o.seed, v));
      mine.push_back(all[v][static_cast<std::size_t>(me)]);
      device.push_back(std::make_unique<DeviceInputs>(mine.back(), stream));
    }
  }
  /// The valid selections of the variants, averaged (each is timed equally often).
  std::size_t mean_selections(const Options& o, int size) const {
    std::size_t sum = 0;
    for (const auto& in : mine)
      sum += count_valid_selections(in.topk_idx.data(), o.tokens, o.topk, o.experts_per_rank, size, nullptr);
    return sum / kVariants;
  }
  const DeviceInputs& on_device(int v) const { return *device[static_cast<std::size_t>(v)]; }

  std::vector<RankInputs> mine;                       ///< this rank's, per variant
  std::vector<std::vector<RankInputs>> all;           ///< every rank's, per variant (the checks)
  std::vector<std::unique_ptr<DeviceInputs>> device;  ///< this rank's, per variant
};

/// The outputs of dispatch and combine on the device, and the expert outputs combined.
struct DeviceOutputs {
  DeviceOutputs(const Shape& s, std::size_t tokens, std::size_t hidden, Stream stream)
      : recv_x(recv_x_bytes(s, Format::kFP8)),
        scales(recv_scales_count(s)),
        tok(recv_rows(s)),
        tk(recv_rows(s)),
        lay(static_cast<std::size_t>(s.experts_per_rank) * s.max_ranks),
        cnt(static_cast<std::size_t>(s.experts_per_rank)),
        expert_out(recv_rows(s) * hidden),
        y(tokens * hidden) {
    expert_out.fill_bytes(0, stream);
  }
  DispatchOutput view() const { return {recv_x.get(), scales.get(), tok.get(), tk.get(), lay.get(), cnt.get()}; }
  /// Every byte of the dispatch outputs 0xFF, so that a row the call leaves alone shows.
  void poison_dispatch(Stream stream) {
    for (auto* a : {&tok, &tk, &lay, &cnt}) a->fill_bytes(0xFF, stream);
    recv_x.fill_bytes(0xFF, stream);
    scales.fill_bytes(0xFF, stream);
  }
  void download_dispatch(DispatchBuffers& host, Stream stream) const {
    recv_x.download(host.recv_x.data(), host.recv_x.size(), stream);
    scales.download(host.recv_scales.data(), host.recv_scales.size(), stream);
    tok.download(host.recv_src_token.data(), host.recv_src_token.size(), stream);
    tk.download(host.recv_src_topk.data(), host.recv_src_topk.size(), stream);
    lay.download(host.layout_count.data(), host.layout_count.size(), stream);
    cnt.download(host.recv_count.data(), host.recv_count.size(), stream);
  }

  DeviceArray<uint8_t> recv_x;
  DeviceArray<float> scales;
  DeviceArray<int32_t> tok, tk, lay, cnt;
  DeviceArray<uint16_t> expert_out, y;
};

/// The timed calls' samples; `*_send` (kernel-only) time the send halves.
struct Samples {
  tools::CallTimes calls;
  std::vector<double> dispatch_send, combine_send;
};

Shape bench_shape(const Options& o, int size) {
  // Kernel-only: one simulated rank owning all size*E experts sees the same selections.
  const Shape s = o.kernel_only ? Shape{1, o.tokens, o.hidden, o.topk, o.experts_per_rank * size}
                                : Shape{size, o.tokens, o.hidden, o.topk, o.experts_per_rank};
  s.validate();
  return s;
}

/// One run of the benchmark on this rank: the call under test, its inputs and outputs,
/// and the steps run() takes in order.
class GpuBench {
 public:
  GpuBench(World& world, const Options& o)
      : world_(world),
        o_(o),
        me_(world.rank()),
        size_(world.size()),
        s_(bench_shape(o, size_)),
        ep_(world, s_, o.kernel_only, std::chrono::milliseconds(o.timeout_ms)),
        stream_(ep_.stream()),
        routing_(Routing::all(s_.max_ranks)),
        inputs_(o, size_, me_, stream_),
        out_(s_, static_cast<std::size_t>(o.tokens), static_cast<std::size_t>(o.hidden), stream_) {
    if (o.flush_l2) l2_ = std::make_unique<DeviceArray<uint8_t>>(std::size_t(256) << 20);
    sync(stream_);
  }

  /// Every variant's outputs against the reference, outside any timed region.
  void check_variants() {
    for (int v = 0; v < kVariants; ++v) check_variant(v);
  }

  void warm_up() {
    for (int i = 0; i < o_.warmup; ++i) {
      dispatch(i % kVariants);
      combine(i % kVariants);
    }
    ep_.synchronize();
    world_.barrier();
  }

  /// --cold-calls: every call flushed and started together.
  Samples time_cold_calls() {
    Samples t;
    Event e0, e1, e2, ed, ec;
    for (int i = 0; i < o_.iters; ++i) {
      // Every rank flushes, then all start together: ranks sharing a GPU share its L2 and
      // its memory bandwidth, so a flush inside another rank's timed call would be timed
      // as that rank's, and a rank still flushing would be timed as its peers' wait.
      flush_l2(i & 0xFF);
      world_.barrier();
      e0.record(stream_);
      dispatch(i % kVariants, o_.kernel_only ? &ed : nullptr);
      e1.record(stream_);
      combine(i % kVariants, o_.kernel_only ? &ec : nullptr);
      e2.record(stream_);
      ep_.synchronize();
      t.calls.add(e1.since(e0), e2.since(e1), e2.since(e0));
      if (o_.kernel_only) {
        t.dispatch_send.push_back(ed.since(e0));
        t.combine_send.push_back(ec.since(e1));
      }
    }
    return t;
  }

  /// As the reference: the L2 flushed once, then the timed calls back to back, each
  /// between events (the calls' own waits keep the ranks in step, as in a model's layers).
  Samples time_back_to_back() {
    flush_l2(0x5A);
    world_.barrier();
    const std::size_t n = static_cast<std::size_t>(o_.iters);
    std::vector<Event> a(n), b(n), c(n), hd(o_.kernel_only ? n : 0), hc(o_.kernel_only ? n : 0);
    for (std::size_t i = 0; i < n; ++i) {
      const int variant = static_cast<int>(i % kVariants);
      a[i].record(stream_);
      dispatch(variant, o_.kernel_only ? &hd[i] : nullptr);
      b[i].record(stream_);
      combine(variant, o_.kernel_only ? &hc[i] : nullptr);
      c[i].record(stream_);
    }
    ep_.synchronize();
    Samples t;
    for (std::size_t i = 0; i < n; ++i) {
      t.calls.add(b[i].since(a[i]), c[i].since(b[i]), c[i].since(a[i]));
      if (o_.kernel_only) {
        t.dispatch_send.push_back(hd[i].since(a[i]));
        t.combine_send.push_back(hc[i].since(b[i]));
      }
    }
    return t;
  }

  /// Prints this rank's lines; returns the logical bytes of one dispatch + combine.
  std::size_t print_results(const Samples& t) const {
    const tools::CallSummary sum = tools::summarize(t.calls, inputs_.mean_selections(o_, size_), o_.hidden);
    tools::print_bandwidth_lines(me_, sum);
    const std::size_t db = sum.dispatch_bytes, cb = sum.combine_bytes;
    std::printf(
        "[rank %d] gpu-bench: mode=%s ranks=%d selections=%zu bytes=%zu median_us=%.2f min_us=%.2f max_us=%.2f "
        "ep_gbps_median=%.2f dispatch_median_us=%.2f combine_median_us=%.2f\n",
        me_, o_.kernel_only ? "kernel-only" : "ipc", size_, sum.selections, db + cb, sum.total.median * 1e6,
        sum.total.min * 1e6, sum.total.max * 1e6, bandwidth_gbps(db, cb, sum.total.median), sum.dispatch.median * 1e6,
        sum.combine.median * 1e6);
    if (o_.kernel_only) report_halves(t);
    std::fflush(stdout);
    return db + cb;
  }

  /// Rank 0 alone on the GPU: the copy and cast baselines of the same run, for `bytes`
  /// (one dispatch + combine).
  void time_baselines(std::size_t bytes) {
    const std::size_t T = static_cast<std::size_t>(o_.tokens), H = static_cast<std::size_t>(o_.hidden);
    DeviceArray<uint8_t> src(bytes), dst(bytes);
    src.fill_bytes(1, stream_);
    const Stats cp = time_op(stream_, o_.warmup, o_.iters, l2_.get(), [&] { copy(dst, src, bytes); });
    std::printf("d2d-copy: bytes=%zu median_us=%.2f min_us=%.2f max_us=%.2f gbps_median=%.2f (bytes copied / time)\n",
                bytes, cp.median * 1e6, cp.min * 1e6, cp.max * 1e6, bytes / 1e9 / cp.median);
    DeviceArray<uint8_t> q(T * H);
    DeviceArray<float> qs(T * (H / kScaleBlock));
    const Stats cast = time_op(stream_, o_.warmup, o_.iters, l2_.get(), [&] {
      cuda::cast_fp8(inputs_.on_device(0).x.get(), o_.tokens, o_.hidden, q.get(), qs.get(), stream_);
    });
    const std::size_t cast_bytes = T * (2 * H + H + H / kScaleBlock * 4);  // read bf16, write fp8 + scales
    // A copy of the cast's input size, for the same-size comparison (read + write counted).
    const std::size_t copied = std::min(T * 2 * H, bytes);
    const Stats cp2 = time_op(stream_, o_.warmup, o_.iters, l2_.get(), [&] { copy(dst, src, copied); });
    std::printf(
        "fp8-cast: rows=%d hidden=%d median_us=%.2f min_us=%.2f max_us=%.2f rw_gbps=%.2f "
        "copy_rw_gbps=%.2f ratio=%.3f (read+write bytes / time)\n",
        o_.tokens, o_.hidden, cast.median * 1e6, cast.min * 1e6, cast.max * 1e6, cast_bytes / 1e9 / cast.median,
        2.0 * copied / 1e9 / cp2.median, (cast_bytes / cast.median) / (2.0 * copied / cp2.median));
    std::fflush(stdout);
  }

  /// No rank frees its region (Ep's destructor) while another still maps it.
  void close_peers() {
    ep_.close_peers();
    world_.barrier();
  }

 private:
  void dispatch(int variant, Event* between = nullptr) {
    const DeviceInputs& d = inputs_.on_device(variant);
    ep_.dispatch(d.x.get(), d.idx.get(), o_.tokens, routing_, out_.view(), between);
  }
  void combine(int variant, Event* between = nullptr) {
    const DeviceInputs& d = inputs_.on_device(variant);
    ep_.combine(out_.expert_out.get(), out_.view(), d.idx.get(), d.w.get(), o_.tokens, out_.y.get(), between);
  }

  void flush_l2(int value) {
    if (!l2_) return;
    cuda_check(cudaMemsetAsync(l2_->get(), value, l2_->size(), to_cuda(stream_)), "L2 flush");
    sync(stream_);
  }

  void copy(DeviceArray<uint8_t>& dst, const DeviceArray<uint8_t>& src, std::size_t bytes) {
    cuda_check(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, to_cuda(stream_)),
               "cudaMemcpyAsync");
  }

  // The check of one variant: poisoned outputs, dispatch, reference checks, identity
  // experts, combine, reference checks. Kernel-only runs the routing of one simulated
  // rank, which the multi-rank reference does not describe.
  void check_variant(int v) {
    if (o_.kernel_only) return;
    const DeviceInputs& d = inputs_.on_device(v);
    const DispatchOutput out = out_.view();
    out_.poison_dispatch(stream_);
    ep_.dispatch(d.x.get(), d.idx.get(), o_.tokens, routing_, out);
    ep_.synchronize();
    DispatchBuffers host(s_, Format::kFP8);
    out_.download_dispatch(host, stream_);
    CheckReport report;
    check_dispatch(s_, Format::kFP8, me_, routing_, inputs_.all[static_cast<std::size_t>(v)], host, report);
    const auto identity = identity_expert_out(s_, Format::kFP8, host);
    DeviceArray<uint16_t> eo(identity.size());
    eo.upload(identity.data(), identity.size(), stream_);
    out_.y.fill_bytes(0xFF, stream_);
    ep_.combine(eo.get(), out, d.idx.get(), d.w.get(), o_.tokens, out_.y.get());
    ep_.synchronize();
    std::vector<uint16_t> hy(out_.y.size());
    out_.y.download(hy.data(), hy.size(), stream_);
    check_combine(s_, Format::kFP8, routing_, inputs_.mine[static_cast<std::size_t>(v)], hy, report);
    if (!report.ok)
      throw Error(fmt::format("rank {}: outputs of input variant {} are wrong: {}", me_, v,
                              report.problems.empty() ? "a check failed" : report.problems.front()));
  }

  // Where a call's time goes: the send half (dispatch: count, cast and write, signal;
  // combine: rows back, signal) and the receive half (dispatch: wait, check, unpack;
  // combine: wait, reduce).
  void report_halves(const Samples& t) const {
    const auto& td = t.calls.dispatch;
    const auto& tc = t.calls.combine;
    std::vector<double> tdr(td.size()), tcr(tc.size());
    for (std::size_t i = 0; i < td.size(); ++i) tdr[i] = td[i] - t.dispatch_send[i], tcr[i] = tc[i] - t.combine_send[i];
    const Stats ds = report::stats_without_first(t.dispatch_send), cs = report::stats_without_first(t.combine_send),
                dr = report::stats_without_first(tdr), cr = report::stats_without_first(tcr);
    std::printf(
        "[rank %d] gpu-bench halves: dispatch_send_median_us=%.2f dispatch_recv_median_us=%.2f "
        "combine_send_median_us=%.2f combine_recv_median_us=%.2f\n",
        me_, ds.median * 1e6, dr.median * 1e6, cs.median * 1e6, cr.median * 1e6);
  }

  World& world_;
  const Options& o_;
  const int me_, size_;
  const Shape s_;
  Ep ep_;
  const Stream stream_;
  const Routing routing_;
  Variants inputs_;
  DeviceOutputs out_;
  std::unique_ptr<DeviceArray<uint8_t>> l2_;
};

int run(const Options& o) {
  World world;
  std::string why;
  if (!select_cuda_device(world.local_rank(), &why)) {
    std::printf("ep-bench-gpu: rank %d: SKIPPED: %s\n", world.rank(), why.c_str());
    std::fflush(stdout);
    return 77;
  }
  if (!o.kernel_only && world.num_nodes() > 1)
    throw UsageError(
        "ep-bench-gpu shares GPUs through CUDA IPC: every rank must be on one node (or use --kernel-only)");
  GpuBench bench(world, o);
  bench.check_variants();
  bench.warm_up();
  const Samples samples = o.cold ? bench.time_cold_calls() : bench.time_back_to_back();
  world.barrier();
  // The outputs are still right after the timed loop (every variant again).
  bench.check_variants();
  world.barrier();
  if (!o.kernel_only)
    std::printf("[rank %d] gpu-bench: outputs of %d input variants checked before and after timing: PASS\n",
                world.rank(), kVariants);
  const std::size_t bytes = bench.print_results(samples);
  world.barrier();
  if (world.rank() == 0) bench.time_baselines(bytes);
  bench.close_peers();
  return 0;
}

}  // namespace
}  // namespace hyrun::ep::check

int main(int argc, char** argv) {
  hyrun::ep::check::Options o;
  CLI::App app{"ep-bench-gpu: dispatch + combine of the CUDA EP backend timed with CUDA events"};
  hyrun::ep::tools::add_bench_options(app, o, hyrun::ep::tools::kMaxCudaTopk,
                                      "all experts local: kernels without peer traffic");
  app.add_flag("!--no-flush-l2", o.flush_l2,
               "do not flush the L2 (before the timed calls, or before each with --cold-calls)");
  app.add_flag("--cold-calls", o.cold,
               "flush the L2 and meet in a barrier before every timed call (default: as the reference, once before "
               "the timed calls, which then run back to back)");
  return hyrun::ep::tools::run_program(app, argc, argv, "ep-bench-gpu", [&] { return hyrun::ep::check::run(o); });
}
