// ep-bench-gpu: times the CUDA backend's dispatch (FP8) + combine (BF16) with CUDA events
// across the ranks of a hyrun job sharing one node's GPUs through CUDA IPC, and, in the
// same run, a device-to-device cudaMemcpy and the FP8 cast kernel alone.
//
//   hyrun -n 4 -- ep-bench-gpu [--tokens 128 --hidden 7168 --topk 8] [--kernel-only]
//
// Timing: --warmup calls, a barrier, then --iters calls; before each, the L2 is flushed
// (a 256 MiB memset outside the events); dispatch and combine are each bracketed by
// events; the first sample is dropped; median, min, max (and avg for the reference
// line). Bandwidth: logical bytes (layout.hpp) / time. --kernel-only: every expert on
// this rank (one simulated rank, own region only): kernel time without peer traffic.
// Lines: the reference "[rank r] Dispatch + combine bandwidth: ..." plus
// "[rank r] gpu-bench: ..." and, from rank 0, "d2d-copy: ..." and "fp8-cast: ...".
// Exit codes: 0, 1 error, 77 no CUDA device.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <numeric>

#include "cuda_memory.hpp"
#include "ep_engine.hpp"
#include "hyrun/common/logging.hpp"
#include "hyrun/ep/cuda_backend.hpp"
#include "hyrun/worker.hpp"
#include "reference_inputs.hpp"

namespace hyrun::ep::check {
namespace {

struct Options {
  int tokens = 128, hidden = 7168, topk = 8, experts_per_rank = 2;
  int warmup = 50, iters = 200;
  uint64_t seed = 1;
  bool kernel_only = false;
  bool flush_l2 = true;
  int timeout_ms = 30000;
};

struct Stats {
  double median = 0, avg = 0, min = 0, max = 0;  // seconds
};
Stats stats_of(std::vector<double> v) {
  if (v.size() > 1) v.erase(v.begin());
  Stats s;
  s.avg = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  std::sort(v.begin(), v.end());
  s.median = v[v.size() / 2];
  s.min = v.front();
  s.max = v.back();
  return s;
}

class Event {
 public:
  Event() { cuda_check(cudaEventCreate(&e_), "cudaEventCreate"); }
  ~Event() { cudaEventDestroy(e_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(const CudaStream& s) { cuda_check(cudaEventRecord(e_, s.get()), "cudaEventRecord"); }
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
Stats time_op(const CudaStream& stream, int warmup, int iters, DeviceArray<uint8_t>* l2, Op op) {
  for (int i = 0; i < warmup; ++i) op();
  stream.sync();
  Event a, b;
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    if (l2) cuda_check(cudaMemsetAsync(l2->get(), i & 0xFF, l2->size(), stream.get()), "L2 flush");
    a.record(stream);
    op();
    b.record(stream);
    stream.sync();
    t.push_back(b.since(a));
  }
  return stats_of(t);
}

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
    throw UsageError("ep-bench-gpu shares GPUs through CUDA IPC: every rank must be on one node (or use --kernel-only)");
  const CaseShape c{o.tokens, o.hidden, o.topk};
  const auto in = make_rank_inputs(c, size, o.experts_per_rank, me, o.seed, 0);
  const Shape s = o.kernel_only ? Shape{1, o.tokens, o.hidden, o.topk, o.experts_per_rank * size}
                                : Shape{size, o.tokens, o.hidden, o.topk, o.experts_per_rank};
  s.validate();

  DeviceRegion region(s);
  std::vector<std::unique_ptr<IpcMapping>> mappings;
  std::vector<void*> peers;
  if (o.kernel_only) {
    peers.push_back(region.get());
  } else {
    const auto handles = world.allgatherv(cuda::ipc_handle(region.get()));
    for (int r = 0; r < size; ++r) {
      if (r == me) {
        peers.push_back(region.get());
      } else {
        mappings.push_back(std::make_unique<IpcMapping>(handles[static_cast<std::size_t>(r)]));
        peers.push_back(mappings.back()->get());
      }
    }
  }
  world.barrier();
  const int ep_rank = o.kernel_only ? 0 : me;
  cuda::CudaBackend ep(s, ep_rank, peers, std::chrono::milliseconds(o.timeout_ms));
  const Routing routing = Routing::all(s.max_ranks);

  const std::size_t T = static_cast<std::size_t>(o.tokens), H = static_cast<std::size_t>(o.hidden);
  DeviceArray<uint16_t> x(T * H);
  DeviceArray<int64_t> idx(T * o.topk);
  DeviceArray<float> w(T * o.topk);
  x.upload(in.x.data(), in.x.size());
  idx.upload(in.topk_idx.data(), in.topk_idx.size());
  w.upload(in.topk_weights.data(), in.topk_weights.size());
  DeviceArray<uint8_t> recv_x(recv_x_bytes(s, Format::kFP8));
  DeviceArray<float> scales(recv_scales_count(s));
  DeviceArray<int32_t> tok(recv_rows(s)), tk(recv_rows(s)),
      lay(static_cast<std::size_t>(s.experts_per_rank) * s.max_ranks), cnt(static_cast<std::size_t>(s.experts_per_rank));
  DeviceArray<uint16_t> expert_out(recv_rows(s) * H), y(T * H);
  expert_out.fill_bytes(0);
  const DispatchOutput out{recv_x.get(), scales.get(), tok.get(), tk.get(), lay.get(), cnt.get()};
  std::unique_ptr<DeviceArray<uint8_t>> l2;
  if (o.flush_l2) l2 = std::make_unique<DeviceArray<uint8_t>>(std::size_t(256) << 20);

  CudaStream stream;
  Event e0, e1, e2;
  auto dispatch = [&] {
    ep.dispatch_send(x.get(), idx.get(), o.tokens, routing, Format::kFP8, stream.ep());
    ep.dispatch_recv(out, stream.ep());
  };
  auto combine = [&] {
    ep.combine_send(expert_out.get(), out, stream.ep());
    ep.combine_recv(idx.get(), w.get(), o.tokens, y.get(), stream.ep());
  };
  for (int i = 0; i < o.warmup; ++i) {
    dispatch();
    combine();
  }
  ep.throw_if_missing(stream.ep());
  world.barrier();
  std::vector<double> td, tc, tt;
  for (int i = 0; i < o.iters; ++i) {
    if (l2) cuda_check(cudaMemsetAsync(l2->get(), i & 0xFF, l2->size(), stream.get()), "L2 flush");
    e0.record(stream);
    dispatch();
    e1.record(stream);
    combine();
    e2.record(stream);
    ep.throw_if_missing(stream.ep());  // synchronizes
    td.push_back(e1.since(e0));
    tc.push_back(e2.since(e1));
    tt.push_back(e2.since(e0));
  }
  world.barrier();

  const std::size_t sel =
      count_valid_selections(in.topk_idx.data(), o.tokens, o.topk, o.experts_per_rank, size, nullptr);
  const std::size_t db = dispatch_bytes(sel, o.hidden, Format::kFP8), cb = combine_bytes(sel, o.hidden);
  const Stats t = stats_of(tt), d = stats_of(td), cm = stats_of(tc);
  const char* mode = o.kernel_only ? "kernel-only" : "ipc";
  std::printf("[rank %d] Dispatch + combine bandwidth: %.2f GB/s, avg_t=%.2f us, min_t=%.2f us, max_t=%.2f us\n", me,
              bandwidth_gbps(db, cb, t.avg), t.avg * 1e6, t.min * 1e6, t.max * 1e6);
  std::printf("[rank %d] Dispatch bandwidth: %.2f GB/s, avg_t=%.2f us | Combine bandwidth: %.2f GB/s, avg_t=%.2f us\n",
              me, db / 1e9 / d.avg, d.avg * 1e6, cb / 1e9 / cm.avg, cm.avg * 1e6);
  std::printf("[rank %d] gpu-bench: mode=%s ranks=%d selections=%zu bytes=%zu median_us=%.2f min_us=%.2f max_us=%.2f "
              "ep_gbps_median=%.2f dispatch_median_us=%.2f combine_median_us=%.2f\n",
              me, mode, size, sel, db + cb, t.median * 1e6, t.min * 1e6, t.max * 1e6,
              bandwidth_gbps(db, cb, t.median), d.median * 1e6, cm.median * 1e6);
  std::fflush(stdout);

  // Rank 0 alone on the GPU: the copy and cast baselines of the same run.
  world.barrier();
  if (me == 0) {
    const std::size_t bytes = db + cb;
    DeviceArray<uint8_t> src(bytes), dst(bytes);
    src.fill_bytes(1);
    const Stats cp = time_op(stream, o.warmup, o.iters, l2.get(), [&] {
      cuda_check(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, stream.get()), "cudaMemcpyAsync");
    });
    std::printf("d2d-copy: bytes=%zu median_us=%.2f min_us=%.2f max_us=%.2f gbps_median=%.2f (bytes copied / time)\n",
                bytes, cp.median * 1e6, cp.min * 1e6, cp.max * 1e6, bytes / 1e9 / cp.median);
    DeviceArray<uint8_t> q(T * H);
    DeviceArray<float> qs(T * (H / kScaleBlock));
    const Stats cast = time_op(stream, o.warmup, o.iters, l2.get(),
                               [&] { cuda::cast_fp8(x.get(), o.tokens, o.hidden, q.get(), qs.get(), stream.ep()); });
    const std::size_t cast_bytes = T * (2 * H + H + H / kScaleBlock * 4);  // read bf16, write fp8 + scales
    // A copy of the cast's input size, for the same-size comparison (read + write counted).
    const std::size_t cbytes = T * 2 * H;
    const Stats cp2 = time_op(stream, o.warmup, o.iters, l2.get(), [&] {
      cuda_check(cudaMemcpyAsync(dst.get(), src.get(), std::min(cbytes, bytes), cudaMemcpyDeviceToDevice, stream.get()),
                 "cudaMemcpyAsync");
    });
    std::printf("fp8-cast: rows=%d hidden=%d median_us=%.2f min_us=%.2f max_us=%.2f rw_gbps=%.2f "
                "copy_rw_gbps=%.2f ratio=%.3f (read+write bytes / time)\n",
                o.tokens, o.hidden, cast.median * 1e6, cast.min * 1e6, cast.max * 1e6, cast_bytes / 1e9 / cast.median,
                2.0 * std::min(cbytes, bytes) / 1e9 / cp2.median,
                (cast_bytes / cast.median) / (2.0 * std::min(cbytes, bytes) / cp2.median));
    std::fflush(stdout);
  }
  world.barrier();
  return 0;
}

}  // namespace
}  // namespace hyrun::ep::check

int main(int argc, char** argv) {
  hyrun::ep::check::Options o;
  CLI::App app{"ep-bench-gpu: dispatch + combine of the CUDA EP backend timed with CUDA events"};
  app.add_option("--tokens", o.tokens, "tokens per rank")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--hidden", o.hidden, "hidden size (multiple of 128)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--topk", o.topk, "top-k")->capture_default_str()->check(CLI::Range(1, 32));
  app.add_option("--experts-per-rank", o.experts_per_rank, "local experts")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup, "untimed calls first")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--iters", o.iters, "timed calls")->capture_default_str()->check(CLI::Range(2, 1000000));
  app.add_option("--seed", o.seed, "seed of the routing")->capture_default_str();
  app.add_flag("--kernel-only", o.kernel_only, "all experts local: kernels without peer traffic");
  app.add_flag("!--no-flush-l2", o.flush_l2, "do not flush the L2 before each sample");
  app.add_option("--timeout-ms", o.timeout_ms, "time limit of every wait for peers")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    hyrun::init_logging("ep-bench-gpu", hyrun::log_level_from_environment("warn"));
    return hyrun::ep::check::run(o);
  } catch (const hyrun::Error& e) {
    std::fprintf(stderr, "ep-bench-gpu: %s\n", e.what());
    return e.exit_code();
  }
}
