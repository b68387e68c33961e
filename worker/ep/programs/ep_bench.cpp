// ep-bench: the elastic expert-parallel benchmark. Started by hyrun; runs every --plan with
// phases of joining, leaving and killed ranks in one launch (docs/ep-bench.md).
//
//   hyrun -n 8 -- ep-bench --plan examples/plans/expansion_contraction.json
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "bench_options.hpp"
#include "elastic_run.hpp"
#include "hyrun/common/env_contract.hpp"
#include "hyrun/ep/report/run_report.hpp"
#include "tool_main.hpp"

namespace {

using hyrun::ep::elastic::BenchOptions;
namespace tools = hyrun::ep::tools;

/// The command line of ep-bench (docs/ep-bench.md), bound to `options`.
void add_options(CLI::App& app, BenchOptions& options) {
  auto& p = options.parameters;
  // One string per occurrence: CLI11 would read "[...]" given to a vector option as a list.
  app.add_option_function<std::string>(
         "--plan", [&options](const std::string& plan) { options.plans.push_back(plan); },
         "plan: a JSON file or JSON text, e.g. '[[0,1],[0,1,2,3]]'; repeat for several")
      ->required()
      ->trigger_on_parse();
  tools::add_shape_options(app, tools::OptionNames::kElastic,
                           {p.num_tokens, p.hidden_dim, p.num_topk, p.num_experts_per_rank});
  tools::add_timeout_option(app, p.timeout_ms, "longest wait for a peer's data");
  app.add_flag("--disable-ll-nvlink", p.disable_ll_nvlink, "no CUDA IPC between ranks of a node (UCX only)");
  app.add_flag("--validate-phase-failures", p.validate_phase_failures,
               "fail unless the ranks detected as failed in each phase are exactly those the plan killed");
  tools::add_backend_option(app, p.backend);
  app.add_option("--dispatch-dtype", p.dispatch_dtype)->check(CLI::IsMember({"fp8", "bf16"}))->capture_default_str();
  tools::add_loop_options(app, p.warmup, p.iters, 1, " per phase");
  app.add_flag("--validate", p.validate, "check the results of every phase");
  app.add_option("--seed", p.seed, "seed of the inputs")->capture_default_str();
  app.add_option("--report-dir", options.report_dir, "write results.json, plan.json and a plot here");
  app.add_flag("--kineto", options.kineto, "also time dispatch and combine apart (the reference's split line)");
  // Set by ep-elastic for staged launches (docs/ep-bench.md, "Staged launches").
  app.add_option("--launch-ranks", options.staged.launch_ranks,
                 "staged launch: ranks 0..K-1 belong to rank 0's launch and start when their phase begins")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--join-port", options.staged.join_port,
                 "staged launch: rank 0 serves joins on this TCP port (0: any)")
      ->check(CLI::Range(0, 65535))
      ->needs("--launch-ranks");
  app.add_flag("--restart-returning", options.staged.restart_returning,
               "staged launch: rank 0's launch also starts the new processes of its ranks that the plan brings back")
      ->needs("--launch-ranks");
  // Hidden: for failure tests (hybrid-test.sh ep-bench-node-lost, ep_elastic_test.sh same-host-deaths).
  app.add_option("--test-stop-in-first-phase", options.stop_in_first_phase,
                 "these ranks stop themselves (SIGSTOP) at the first timed call of their first phase")
      ->delimiter(',')
      ->group("");
}

/// Joins the World and runs every plan; returns the exit code (run_tool catches the errors).
int run(BenchOptions& options) {
  auto& p = options.parameters;
  // Rank 0 checks --report-dir before anything runs: a report that cannot be written must
  // not cost the whole run. It fails before it publishes its address, so no other rank
  // starts (or every node ends, under Slurm).
  const char* rank = std::getenv(hyrun::env::kRank);
  if (!options.report_dir.empty() && rank && std::string_view(rank) == "0")
    hyrun::ep::report::check_report_dir(options.report_dir);
  hyrun::WorldOptions world_options;
  world_options.peer_error_handling = true;  // survivors must outlive killed ranks and see them die
  hyrun::World world(world_options);
  p.world_size = world.size();
  // --backend cuda without a usable GPU fails here, at once, naming why.
  options.backend = hyrun::ep::choose_backend(p.backend, p.disable_ll_nvlink, world);
  p.backend = hyrun::ep::on_device(options.backend) ? "cuda" : "host";
  try {
    return hyrun::ep::elastic::run_elastic_bench(world, options);
  } catch (const hyrun::Error& e) {
    // Said while this rank is still connected: its peers notice its end at once, and hyrun
    // may stop this process before the World's teardown is over.
    std::fprintf(stderr, "ep-bench: %s\n", e.what());
    std::fflush(stderr);
    return e.exit_code();
  }
}

}  // namespace

int main(int argc, char** argv) {
  BenchOptions options;
  CLI::App app{"ep-bench: elastic expert-parallel dispatch + combine benchmark (run it under hyrun)"};
  add_options(app, options);
  return tools::run_program(app, argc, argv, "ep-bench", [&] { return run(options); });
}
