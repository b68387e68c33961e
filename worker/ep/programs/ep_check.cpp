// ep-check: the reference correctness test of the EP dispatch/combine across real
// processes. Started by hyrun; every rank joins the World, builds its EP buffers once for
// the largest shape and world (--max-ranks), then for every shape and dispatch format
// runs dispatch + combine with poisoned outputs and checks every element (see
// reference_checks.hpp). With two ranks or more, two fault rounds follow: a masked round
// (the last rank is marked inactive: nobody may write to it, nobody may wait for it) and
// a timeout round (the last rank silently skips a dispatch: the others must report it
// within --silent-timeout-ms instead of waiting forever).
//
//   hyrun -n 4 -- ep-check [--shapes 128:7168:8,1:2048:1] [--backend host|cuda|auto]
//
// Output: one line per rank and round, "ep-check: rank R ...: PASS|FAIL ..."; rank 0 ends
// with "ep-check: SUMMARY ...". Exit codes: 0 every check on every rank passed, 1 a check
// failed (here or on another rank), 2 usage, 124 an unexpected time-out, 77 --backend
// cuda without a usable GPU (skip).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "bench_options.hpp"
#include "ep_engine.hpp"
#include "hyrun/ep/reference_checks.hpp"
#include "hyrun/ep/reference_inputs.hpp"
#include "hyrun/ep/transport.hpp"
#include "hyrun/worker.hpp"
#include "tool_main.hpp"

namespace hyrun::ep::check {
namespace {

constexpr int kSkipExitCode = 77;

struct Options {
  std::string shapes;
  int experts_per_rank = 2;
  int max_ranks = 0;
  uint64_t seed = 1;
  std::string backend = "host";
  std::string dtype = "both";
  int timeout_ms = 30000;
  int silent_timeout_ms = 500;
  bool fault_rounds = true;
  bool disable_ll_nvlink = false;
  int inject_corruption = -1;
};

void say(const std::string& line) {
  std::fputs(line.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

std::string rank_list(const std::vector<int>& ranks) { return format_ranks(ranks); }

class Checker {
 public:
  Checker(World& world, Engine& engine, const Options& o) : world_(world), engine_(engine), o_(o) {}

  /// One dispatch + combine of rank `me` with full checks; returns the report.
  CheckReport round(const Shape& s, Format f, const Routing& routing, const std::vector<RankInputs>& all) {
    const int me = world_.rank();
    CheckReport rep;
    DispatchBuffers out(s, f);
    out.poison();
    engine_.dispatch(all[me], routing, f, out);
    if (o_.inject_corruption == me && !injected_) inject(s, f, out);
    check_dispatch(s, f, me, routing, all, out, rep);
    const auto expert_out = identity_expert_out(s, f, out);
    std::vector<uint16_t> y(static_cast<std::size_t>(s.max_tokens) * s.hidden, 0xFFFF);  // poison: bf16 NaN
    engine_.combine(all[me], expert_out, y);
    check_combine(s, f, routing, all[me], y, rep);
    return rep;
  }

  void record(const std::string& what, const CheckReport& rep) {
    ++checks_;
    std::string line =
        fmt::format("ep-check: rank {} {} {}: {} diff={:.3e} max_rel={:.3e} rows={}", world_.rank(), what,
                    engine_.name(), rep.ok ? "PASS" : "FAIL", rep.combine_diff, rep.max_elem_rel, rep.rows_checked);
    if (!rep.ok) {
      ++failures_;
      for (const auto& p : rep.problems) line += " | " + p;
    }
    say(line);
  }
  void record(const std::string& what, bool ok, const std::string& detail) {
    ++checks_;
    if (!ok) ++failures_;
    say(fmt::format("ep-check: rank {} {} {}: {} {}", world_.rank(), what, engine_.name(), ok ? "PASS" : "FAIL",
                    detail));
  }
  int checks() const { return checks_; }
  int failures() const { return failures_; }

 private:
  // Debug: flips one byte in the first received row, to prove the checks bite.
  void inject(const Shape& s, Format f, DispatchBuffers& out) {
    const int R = s.max_ranks, T = s.max_tokens;
    for (int e = 0; e < s.experts_per_rank; ++e)
      for (int src = 0; src < R; ++src)
        if (out.layout_count[static_cast<std::size_t>(e) * R + src] > 0) {
          const std::size_t row = (static_cast<std::size_t>(e) * R + src) * T;
          out.recv_x[row * s.hidden * (f == Format::kFP8 ? 1 : 2)] ^= 0x04;
          spdlog::warn("--inject-corruption: flipped a byte of local expert {} row 0 from rank {}", e, src);
          injected_ = true;
          return;
        }
  }
  World& world_;
  Engine& engine_;
  const Options& o_;
  bool injected_ = false;
  int checks_ = 0, failures_ = 0;
};

std::vector<Format> formats_of(const std::string& dtype) {
  if (dtype == "fp8") return {Format::kFP8};
  if (dtype == "bf16") return {Format::kBF16};
  return {Format::kFP8, Format::kBF16};
}

/// The engine of --backend (nullptr and *skipped when CUDA was asked for without a GPU).
std::unique_ptr<Engine> make_engine(World& world, const Options& o, const Shape& max_shape, bool* skipped) {
  Backend backend = Backend::kHost;
  try {
    // Only a CUDA run touches the CUDA runtime (its initialization costs time and memory).
    backend = choose_backend(o.backend, o.disable_ll_nvlink, world);
  } catch (const UsageError& e) {
    if (o.backend != "cuda") throw;
    say(fmt::format("ep-check: rank {}: SKIPPED: {}", world.rank(), e.what()));
    *skipped = true;
    return nullptr;
  }
  return std::make_unique<Engine>(world, max_shape, backend, std::chrono::milliseconds(o.timeout_ms));
}

/// The shape the buffers are built for: the largest of every case, for `max_ranks` ranks.
Shape largest_shape(const std::vector<CaseShape>& shapes, int max_ranks, int experts_per_rank) {
  Shape max_shape{max_ranks, 1, kScaleBlock, 1, experts_per_rank};
  for (const auto& c : shapes) {
    max_shape.max_tokens = std::max(max_shape.max_tokens, c.tokens);
    max_shape.hidden = std::max(max_shape.hidden, c.hidden);
    max_shape.topk = std::max(max_shape.topk, c.topk);
  }
  max_shape.validate();
  return max_shape;
}

/// True when any rank skips. Every rank decides alike (same build, same options); a skip
/// is still agreed on.
bool any_rank_skips(World& world, bool skipped) {
  const std::byte skip_byte{static_cast<uint8_t>(skipped)};
  const auto skips = world.allgather(std::span(&skip_byte, 1));
  return std::any_of(skips.begin(), skips.end(), [](std::byte b) { return b != std::byte{0}; });
}

/// What every round of one run shares.
struct Rounds {
  World& world;
  const Options& o;
  Engine& engine;
  Checker& checker;
  int max_ranks;
  std::chrono::milliseconds timeout;

  int me() const { return world.rank(); }
  int size() const { return world.size(); }
  std::vector<RankInputs> inputs_of_all(const CaseShape& c, int case_index) const {
    std::vector<RankInputs> all;
    for (int r = 0; r < size(); ++r)
      all.push_back(make_rank_inputs(c, size(), o.experts_per_rank, r, o.seed, case_index));
    return all;
  }
  Shape shape_of(const CaseShape& c) const {
    Shape s{max_ranks, c.tokens, c.hidden, c.topk, o.experts_per_rank};
    s.validate();
    return s;
  }

  /// Every shape in every format, every rank active.
  void shape_rounds(const std::vector<CaseShape>& shapes, const std::vector<Format>& formats) {
    const Routing everyone = Routing::all(size());
    for (std::size_t ci = 0; ci < shapes.size(); ++ci) {
      const Shape s = shape_of(shapes[ci]);
      const auto all = inputs_of_all(shapes[ci], static_cast<int>(ci));
      engine.begin_shape(s, timeout);
      for (Format f : formats) {
        const std::string what = fmt::format("{} E={} {}", shapes[ci].describe(), o.experts_per_rank, to_string(f));
        try {
          checker.record(what, checker.round(s, f, everyone, all));
        } catch (const Error& e) {
          checker.record(what, false, e.what());
          throw;  // the ranks are out of step now; hyrun stops the others
        }
      }
    }
  }

  /// The victim is inactive; its region is filled with a witness pattern that must
  /// survive, and the others must finish without it.
  void masked_round(const CaseShape& c, const Shape& s, int victim, const std::vector<RankInputs>& all) {
    Routing masked{size(), std::vector<uint8_t>(static_cast<std::size_t>(size()), 1)};
    masked.active[static_cast<std::size_t>(victim)] = 0;
    engine.begin_shape(s, timeout);
    constexpr uint8_t kWitness = 0xA5;
    if (me() == victim) engine.fill_region(kWitness);
    world.barrier();
    const std::string what =
        fmt::format("masked round (rank {} inactive) {} E={} fp8", victim, c.describe(), o.experts_per_rank);
    if (me() != victim) {
      checker.record(what, checker.round(s, Format::kFP8, masked, all));
    }
    world.barrier();  // every active rank is done writing
    if (me() == victim) {
      const std::size_t touched = engine.region_bytes_not(kWitness);
      checker.record(what, touched == 0,
                     touched == 0 ? "nobody wrote to the inactive rank's region"
                                  : fmt::format("{} bytes of the inactive rank's region were written", touched));
    }
  }

  /// The victim is active in the routing but never dispatches.
  void timeout_round(const Shape& s, int victim, const std::vector<RankInputs>& all) {
    engine.begin_shape(s, std::chrono::milliseconds(o.silent_timeout_ms));
    const std::string what = fmt::format("timeout round (rank {} silent, {} ms)", victim, o.silent_timeout_ms);
    if (me() == victim) {
      checker.record(what, true, "stayed silent");
    } else {
      DispatchBuffers out(s, Format::kFP8);
      const auto t0 = Clock::now();
      try {
        engine.dispatch(all[me()], Routing::all(size()), Format::kFP8, out);
        checker.record(what, false, "dispatch returned although a rank never sent");
      } catch (const PeerTimeoutError& e) {
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
        const bool named = e.ranks() == std::vector<int>{victim};
        checker.record(what, named,
                       fmt::format("rank(s) {} reported after {} ms{}", rank_list(e.ranks()), ms,
                                   named ? "" : fmt::format(", expected exactly rank {}", victim)));
      }
    }
    world.barrier();
  }

  /// The masked and the timeout round, on the middle shape, the last rank the victim.
  void fault_rounds(const std::vector<CaseShape>& shapes) {
    const CaseShape& c = shapes[shapes.size() / 2];
    const Shape s = shape_of(c);
    const int victim = size() - 1;
    const auto all = inputs_of_all(c, static_cast<int>(shapes.size()));
    masked_round(c, s, victim, all);
    timeout_round(s, victim, all);
  }

  /// Every rank learns every rank's result, so all exit alike; rank 0 says the summary.
  /// Returns the failures of all ranks.
  int summary(std::size_t shape_count) {
    const int32_t mine[2] = {checker.checks(), checker.failures()};
    const auto gathered = world.allgather(std::as_bytes(std::span(mine)));
    std::vector<int> failed_ranks;
    int total_checks = 0, total_failures = 0;
    for (int r = 0; r < size(); ++r) {
      int32_t v[2];
      std::memcpy(v, gathered.data() + static_cast<std::size_t>(r) * sizeof v, sizeof v);
      total_checks += v[0];
      total_failures += v[1];
      if (v[1] > 0) failed_ranks.push_back(r);
    }
    if (me() == 0)
      say(fmt::format("ep-check: SUMMARY {} ranks, {} shapes, backend {}: {} checks, {}", size(), shape_count,
                      engine.name(), total_checks,
                      total_failures == 0
                          ? std::string("ALL PASSED")
                          : fmt::format("{} FAILED on rank(s) {}", total_failures, rank_list(failed_ranks))));
    return total_failures;
  }
};

int run(const Options& o) {
  World world;
  const int size = world.size();
  const int max_ranks = o.max_ranks > 0 ? o.max_ranks : size;
  if (max_ranks < size) throw UsageError(fmt::format("--max-ranks {} is below the world size {}", max_ranks, size));
  const auto shapes = o.shapes.empty() ? default_shapes() : parse_shapes(o.shapes);

  // Buffers once, for the largest of everything.
  const Shape max_shape = largest_shape(shapes, max_ranks, o.experts_per_rank);
  bool skipped = false;
  auto engine = make_engine(world, o, max_shape, &skipped);
  if (any_rank_skips(world, skipped)) return kSkipExitCode;
  if (world.rank() == 0)
    spdlog::info("ep-check: {} ranks, max_ranks {}, buffers for {} ({} bytes of receive region per rank)", size,
                 max_ranks, max_shape.describe(), region_bytes(max_shape));

  Checker checker(world, *engine, o);
  Rounds rounds{world, o, *engine, checker, max_ranks, std::chrono::milliseconds(o.timeout_ms)};
  rounds.shape_rounds(shapes, formats_of(o.dtype));
  if (o.fault_rounds && size >= 2) rounds.fault_rounds(shapes);
  const int failures = rounds.summary(shapes.size());
  // No rank frees its region (engine's destructor) while another still maps it.
  engine->close_peers();
  world.barrier();
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace hyrun::ep::check

int main(int argc, char** argv) {
  using hyrun::ep::check::Options;
  Options o;
  CLI::App app{"ep-check: EP dispatch/combine reference checks across the ranks of a hyrun job"};
  app.add_option("--shapes", o.shapes,
                 "TOKENS:HIDDEN:TOPK,... (default: a sweep of hidden 2048..8192, tokens 1..256, top-k 1..8)");
  app.add_option("--experts-per-rank", o.experts_per_rank, "local experts per rank")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--max-ranks", o.max_ranks, "largest world the buffers serve (default: the world size)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--seed", o.seed, "seed of the random routing")->capture_default_str();
  hyrun::ep::tools::add_backend_option(app, o.backend);
  app.add_option("--dispatch-dtype", o.dtype, "fp8, bf16 or both")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp8", "bf16", "both"}));
  hyrun::ep::tools::add_timeout_option(app, o.timeout_ms, "time limit of every wait for peers");
  app.add_option("--silent-timeout-ms", o.silent_timeout_ms, "time limit in the timeout round")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("!--no-fault-rounds", o.fault_rounds, "skip the masked and timeout rounds");
  app.add_flag("--disable-ll-nvlink", o.disable_ll_nvlink,
               "CUDA backend: no CUDA IPC; stage through pinned host memory and send with UCX");
  app.add_option("--inject-corruption", o.inject_corruption,
                 "debug: flip a byte of one received row on this rank (the checks must fail)");
  return hyrun::ep::tools::run_program(app, argc, argv, "ep-check", [&] { return hyrun::ep::check::run(o); });
}
