#pragma once
// The command line that ep-bench-host and ep-bench-gpu share: the shape, the timing loop,
// the routing seed and the peer time limit. Each program adds its own options and sets its
// own warm-up and iteration defaults before add_bench_options (the help shows them).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace hyrun::ep::tools {

struct BenchOptions {
  int tokens = 128, hidden = 7168, topk = 8, experts_per_rank = 2;
  int warmup = 20, iters = 100;
  uint64_t seed = 1;
  bool kernel_only = false;
  int timeout_ms = 30000;
};

/// Registers the shared options on `app`, bound to `o`. `topk_check` bounds --topk (the
/// CUDA kernels hold a token's selections in 32 lanes); `kernel_only_help` says what
/// --kernel-only leaves out for this program.
inline void add_bench_options(CLI::App& app, BenchOptions& o, const CLI::Validator& topk_check,
                              const std::string& kernel_only_help) {
  app.add_option("--tokens", o.tokens, "tokens per rank")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--hidden", o.hidden, "hidden size (multiple of 128)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--topk", o.topk, "top-k")->capture_default_str()->check(topk_check);
  app.add_option("--experts-per-rank", o.experts_per_rank, "local experts")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup, "untimed calls first")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--iters", o.iters, "timed calls")->capture_default_str()->check(CLI::Range(2, 1000000));
  app.add_option("--seed", o.seed, "seed of the routing")->capture_default_str();
  app.add_flag("--kernel-only", o.kernel_only, kernel_only_help);
  app.add_option("--timeout-ms", o.timeout_ms, "time limit of every wait for peers")->capture_default_str();
}

}  // namespace hyrun::ep::tools
