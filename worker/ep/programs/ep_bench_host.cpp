// ep-bench-host: times the host backend's dispatch (FP8) + combine (BF16) across the ranks
// of a hyrun job and prints the reference benchmark's lines with logical-byte bandwidth
// (every valid selection counts, traffic to the rank itself included; layout.hpp).
//
//   hyrun -n 4 -- ep-bench-host [--tokens 128 --hidden 7168 --topk 8] [--kernel-only]
//
// --kernel-only runs the same routing with every expert on this rank (one simulated
// rank, in-process transport): the packing/unpacking/reduction work without the network.
// recv_x / recv_scales are the region's rows (Buffer::region_rows, DeepEP's packed_recv_x:
// the rows are not copied on receipt); --copy-recv receives into private arrays instead.
// Timing: --warmup calls, a barrier, then --iters calls each timed on the steady clock;
// the first sample is dropped; avg/min/max per rank.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <numeric>

#include "bench_options.hpp"
#include "bench_results.hpp"
#include "hyrun/ep/buffer.hpp"
#include "hyrun/ep/host_backend.hpp"
#include "hyrun/ep/reference_inputs.hpp"
#include "hyrun/worker.hpp"
#include "tool_main.hpp"

namespace hyrun::ep::check {
namespace {

struct Options : tools::BenchOptions {
  bool copy_recv = false;
};

int run(const Options& o) {
  World world;
  const int me = world.rank(), size = world.size();
  const CaseShape c{o.tokens, o.hidden, o.topk};
  const auto in = make_rank_inputs(c, size, o.experts_per_rank, me, o.seed, 0);
  const auto timeout = std::chrono::milliseconds(o.timeout_ms);

  // Kernel-only: one rank owning all size*E experts sees exactly the same selections.
  const Shape s = o.kernel_only ? Shape{1, o.tokens, o.hidden, o.topk, o.experts_per_rank * size}
                                : Shape{size, o.tokens, o.hidden, o.topk, o.experts_per_rank};
  s.validate();
  // Transport mode: the library's EP front. Kernel-only: the host backend alone over the
  // in-process fabric (one simulated rank: the compute baseline without any transport).
  std::unique_ptr<InProcessFabric> fabric;
  std::unique_ptr<HostBackend> alone;
  std::unique_ptr<Buffer> buffer;
  if (o.kernel_only) {
    fabric = std::make_unique<InProcessFabric>(1, region_bytes(s));
    alone = std::make_unique<HostBackend>(s, fabric->transport(0), timeout);
  } else {
    buffer = std::make_unique<Buffer>(world, BufferOptions{s, Backend::kHost, timeout, PeerAttach::kCollective});
  }
  const Routing routing = Routing::all(s.max_ranks);
  DispatchBuffers recv(s, Format::kFP8);
  DispatchOutput out = recv.view();
  if (!o.copy_recv) {
    const RegionRows rows = buffer ? buffer->region_rows(Format::kFP8) : alone->region_rows(Format::kFP8);
    out.recv_x = rows.recv_x;
    out.recv_scales = rows.recv_scales;
  }
  std::vector<uint16_t> expert_out(recv_rows(s) * s.hidden, 0);
  std::vector<uint16_t> y(static_cast<std::size_t>(o.tokens) * o.hidden);
  auto dispatch = [&] {
    if (buffer)
      buffer->dispatch(in.x.data(), in.topk_idx.data(), o.tokens, routing, Format::kFP8, out);
    else
      alone->dispatch(in.x.data(), in.topk_idx.data(), o.tokens, routing, Format::kFP8, out);
  };
  auto combine = [&] {
    if (buffer)
      buffer->combine(expert_out.data(), out, in.topk_idx.data(), in.topk_weights.data(), o.tokens, y.data());
    else
      alone->combine(expert_out.data(), out, in.topk_idx.data(), in.topk_weights.data(), o.tokens, y.data());
  };

  for (int i = 0; i < o.warmup; ++i) {
    dispatch();
    combine();
  }
  world.barrier();
  tools::CallTimes times;
  for (int i = 0; i < o.iters; ++i) {
    const auto t0 = Clock::now();
    dispatch();
    const auto t1 = Clock::now();
    combine();
    const auto t2 = Clock::now();
    times.add(std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count(),
              std::chrono::duration<double>(t2 - t0).count());
  }
  world.barrier();

  const auto summary = tools::summarize(
      times, count_valid_selections(in.topk_idx.data(), o.tokens, o.topk, o.experts_per_rank, size, nullptr), o.hidden);
  tools::print_bandwidth_lines(me, summary);
  std::printf(
      "[rank %d] accounting: mode=%s selections=%zu dispatch_bytes=%zu combine_bytes=%zu "
      "dispatch_msg_bytes=%zu combine_msg_bytes=%zu (logical bytes, self traffic included)\n",
      me, o.kernel_only ? "kernel-only" : "transport", summary.selections, summary.dispatch_bytes,
      summary.combine_bytes, dispatch_bytes_per_selection(o.hidden, Format::kFP8),
      combine_bytes_per_selection(o.hidden));
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace hyrun::ep::check

int main(int argc, char** argv) {
  hyrun::ep::check::Options o;
  CLI::App app{"ep-bench-host: dispatch + combine bandwidth of the host EP backend across hyrun ranks"};
  hyrun::ep::tools::add_bench_options(app, o, hyrun::ep::tools::kMaxTopk,
                                      "all experts local: compute without the network");
  app.add_flag("--copy-recv", o.copy_recv,
               "receive into private recv_x/recv_scales (a copy) instead of the region's rows");
  return hyrun::ep::tools::run_program(app, argc, argv, "ep-bench-host", [&] { return hyrun::ep::check::run(o); });
}
