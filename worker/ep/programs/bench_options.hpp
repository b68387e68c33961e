#pragma once
// The EP benchmark options, defined once for every program that takes them: ep-bench and
// ep-elastic (with elastic.py's names: --num-tokens, --hidden-dim, ...) and ep-bench-host and
// ep-bench-gpu (short names: --tokens, --hidden, ...). One range per option, whatever its
// name, so that a value one program takes is never refused by the program it starts.
// Each program keeps the values in its own struct and sets its own defaults before adding
// the options (the help shows them).
#include <CLI/CLI.hpp>
#include <charconv>
#include <climits>
#include <cstdint>
#include <string>

namespace hyrun::ep::tools {

inline constexpr int kMaxTokens = 1 << 16;
inline constexpr int kMaxHidden = 1 << 16;
/// One FP8 scale covers 128 channels, so a hidden size is a whole number of them.
inline constexpr int kHiddenMultiple = 128;
inline constexpr int kMaxTopk = 64;
/// The CUDA kernels hold a token's selections in one warp's 32 lanes.
inline constexpr int kMaxCudaTopk = 32;
inline constexpr int kMaxExpertsPerRank = 1024;
inline constexpr int kMaxIterations = 1 << 20;

/// Which names the options go by.
enum class OptionNames {
  kElastic,  ///< elastic.py's: --num-tokens, --hidden-dim, --num-topk, --num-experts-per-rank
  kShort,    ///< ep-bench-host's and ep-bench-gpu's: --tokens, --hidden, --topk, --experts-per-rank
};

/// Where the shape options' values go.
struct ShapeTargets {
  int& tokens;
  int& hidden;
  int& topk;
  int& experts_per_rank;
};

/// --tokens, --hidden, --topk and --experts-per-rank (or elastic.py's names), with their
/// ranges; `max_topk` is kMaxTopk, or kMaxCudaTopk for a program that only runs the CUDA kernels.
inline void add_shape_options(CLI::App& app, OptionNames names, ShapeTargets to, int max_topk = kMaxTopk) {
  const bool elastic = names == OptionNames::kElastic;
  // Run after the range check, which has refused what is not a number.
  const CLI::Validator hidden_multiple(
      [](std::string& value) {
        int hidden = 0;
        std::from_chars(value.data(), value.data() + value.size(), hidden);
        return hidden % kHiddenMultiple == 0 ? std::string()
                                             : value + " is not a multiple of 128 (one FP8 scale per 128 channels)";
      },
      "");
  app.add_option(elastic ? "--num-tokens" : "--tokens", to.tokens, "tokens per rank")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxTokens));
  app.add_option(elastic ? "--hidden-dim" : "--hidden", to.hidden, "hidden size (a multiple of 128)")
      ->capture_default_str()
      ->check(CLI::Range(kHiddenMultiple, kMaxHidden))
      ->check(hidden_multiple);
  app.add_option(elastic ? "--num-topk" : "--topk", to.topk, "experts per token")
      ->capture_default_str()
      ->check(CLI::Range(1, max_topk));
  app.add_option(elastic ? "--num-experts-per-rank" : "--experts-per-rank", to.experts_per_rank, "experts on each rank")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxExpertsPerRank));
}

/// --warmup and --iters. `min_iters` is 2 for a program that drops the first timed sample.
inline void add_loop_options(CLI::App& app, int& warmup, int& iters, int min_iters, const std::string& per) {
  app.add_option("--warmup", warmup, "untimed iterations" + per)
      ->capture_default_str()
      ->check(CLI::Range(0, kMaxIterations));
  app.add_option("--iters", iters, "timed iterations" + per)
      ->capture_default_str()
      ->check(CLI::Range(min_iters, kMaxIterations));
}

/// --timeout-ms: the limit of every wait for a peer.
inline void add_timeout_option(CLI::App& app, int& timeout_ms, const std::string& help) {
  app.add_option("--timeout-ms", timeout_ms, help)->capture_default_str()->check(CLI::Range(1, INT_MAX));
}

/// --backend: auto (CUDA when a GPU is usable), cuda or host.
inline void add_backend_option(CLI::App& app, std::string& backend) {
  app.add_option("--backend", backend, "auto, cuda or host")
      ->check(CLI::IsMember({"auto", "cuda", "host"}))
      ->capture_default_str();
}

/// What ep-bench-host and ep-bench-gpu share beyond the shape: the timing loop, the routing
/// seed, --kernel-only and the peer time limit.
struct BenchOptions {
  int tokens = 128, hidden = 7168, topk = 8, experts_per_rank = 2;
  int warmup = 20, iters = 100;
  uint64_t seed = 1;
  bool kernel_only = false;
  int timeout_ms = 30000;
};

/// Registers the options of ep-bench-host and ep-bench-gpu on `app`, bound to `o`;
/// `kernel_only_help` says what --kernel-only leaves out for this program.
inline void add_bench_options(CLI::App& app, BenchOptions& o, int max_topk, const std::string& kernel_only_help) {
  add_shape_options(app, OptionNames::kShort, {o.tokens, o.hidden, o.topk, o.experts_per_rank}, max_topk);
  add_loop_options(app, o.warmup, o.iters, 2, "");
  app.add_option("--seed", o.seed, "seed of the routing")->capture_default_str();
  app.add_flag("--kernel-only", o.kernel_only, kernel_only_help);
  add_timeout_option(app, o.timeout_ms, "time limit of every wait for peers");
}

}  // namespace hyrun::ep::tools
