// ep-elastic: the NIXL Elastic EP benchmark's command line (elastic.py) on hyrun. One
// invocation per node and stage, as CloudAI's NixlEP workload starts elastic.py:
//
//   ep-elastic --plan plan.json --num-processes 4                        # first launch: rank 0, join server
//   ep-elastic --plan plan.json --num-processes 4 --tcp-server MASTER    # a later launch joins the job
//
// It takes exactly elastic.py's options (plus a few of hyrun's, all optional), starts its
// ranks through hyrun's launcher running ep-bench, and starts each rank when the phase that
// needs it begins (docs/ep-bench.md, "Staged launches").
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "bench_options.hpp"
#include "hyrun/common/env_contract.hpp"
#include "hyrun/common/error.hpp"
#include "hyrun/common/job_token.hpp"
#include "hyrun/common/logging.hpp"
#include "hyrun/ep/plan/elastic_plan.hpp"
#include "hyrun/launcher/help_formatter.hpp"
#include "hyrun/process/job_events.hpp"
#include "hyrun/process/launcher_process.hpp"
#include "hyrun/process/own_stderr.hpp"
#include "staged_launch.hpp"
#include "token_file.hpp"
#include "tool_main.hpp"

namespace {

/// ep-bench beside this program (build tree and installation alike).
std::string ep_bench_path() {
  if (const char* p = std::getenv(hyrun::env::kEpBench)) return p;
  char self[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) throw hyrun::SystemError("finding ep-bench: readlink /proc/self/exe", errno);
  return (std::filesystem::path(std::string(self, static_cast<std::size_t>(n))).parent_path() / "ep-bench").string();
}

/// The token file's default: beside the plan file (CloudAI writes the plan into the test's
/// output directory, which every step sees), else the working directory.
std::string default_token_file(const std::string& plan, int port) {
  std::error_code ec;
  const std::filesystem::path p(plan);
  const auto dir = std::filesystem::is_regular_file(p, ec) ? std::filesystem::absolute(p, ec).parent_path()
                                                           : std::filesystem::current_path(ec);
  return (dir / fmt::format(".hyrun-ep-token-{}", port)).string();
}

/// The last line of a failed launch. Its wording holds CloudAI's failure pattern "Exited
/// with exit code": the reference's elastic.py ends a failed launch with a Python traceback,
/// and CloudAI must fail the run on an unplanned failure (hyrun's own line names the rank).
void report_failed_launch(int code) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  hyrun::job_event("ep-elastic on {}: Exited with exit code {}", host, code);
}

/// ep-elastic's command line: elastic.py's options, then hyrun's own.
struct Arguments {
  std::string plan = "plan.json";
  int num_processes = 8;
  int num_tokens = 128, hidden = 7168, topk = 8, experts_per_rank = 2;
  int timeout_ms = 30000;
  std::string tcp_server, token_file, backend = "auto", report_dir;
  bool kineto = false, disable_ll_nvlink = false, validate_phase_failures = false, restart_returning = false;
  int port = 9999, warmup = 50, iters = 50;
  double bootstrap_timeout_s = 60;
};

void add_options(CLI::App& app, Arguments& a) {
  namespace tools = hyrun::ep::tools;
  app.add_option("--plan", a.plan, "plan file (a JSON list of phases), or the plan as JSON text")
      ->capture_default_str();
  app.add_option("--num-processes", a.num_processes, "ranks this launch runs")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  tools::add_shape_options(app, tools::OptionNames::kElastic, {a.num_tokens, a.hidden, a.topk, a.experts_per_rank});
  app.add_option("--tcp-server", a.tcp_server,
                 "address of the first launch's node: join that job (no value: start it)");
  app.add_flag("--kineto", a.kineto, "also print dispatch and combine bandwidth apart");
  app.add_flag("--disable-ll-nvlink", a.disable_ll_nvlink, "no direct NVLink stores between ranks of a node");
  tools::add_timeout_option(app, a.timeout_ms, "limit of every wait for a peer, and of a join");
  app.add_flag("--validate-phase-failures", a.validate_phase_failures,
               "fail unless each phase's detected failures are exactly the ranks the plan killed");
  // hyrun's own, all optional: CloudAI passes unknown TOML keys as --key value.
  app.add_option("--port", a.port, "TCP port of the join server (the readiness probe)")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535));
  app.add_option("--token-file", a.token_file, "the job's token file (default: .hyrun-ep-token-PORT beside the plan)");
  app.add_flag("--restart-returning", a.restart_returning,
               "this launch starts again its own ranks that the plan brings back (one launch runs the whole plan)");
  tools::add_backend_option(app, a.backend);
  tools::add_loop_options(app, a.warmup, a.iters, 1, " per phase");
  app.add_option("--report-dir", a.report_dir, "first launch: write results.json, plan.json and a plot here");
  app.add_option("--bootstrap-timeout", a.bootstrap_timeout_s, "seconds a rank may take to join the job")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 86400.0));
  // As argparse in elastic.py: a repeated option takes its last value.
  for (CLI::Option* option : app.get_options()) option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

/// The ep-bench command every rank runs, with the options ep-elastic passes on.
std::vector<std::string> ep_bench_command(const Arguments& a) {
  std::vector<std::string> command{ep_bench_path(),
                                   "--plan",
                                   a.plan,
                                   "--num-tokens",
                                   std::to_string(a.num_tokens),
                                   "--num-experts-per-rank",
                                   std::to_string(a.experts_per_rank),
                                   "--hidden-dim",
                                   std::to_string(a.hidden),
                                   "--num-topk",
                                   std::to_string(a.topk),
                                   "--timeout-ms",
                                   std::to_string(a.timeout_ms),
                                   "--backend",
                                   a.backend,
                                   "--warmup",
                                   std::to_string(a.warmup),
                                   "--iters",
                                   std::to_string(a.iters)};
  if (a.kineto) command.emplace_back("--kineto");
  if (!a.report_dir.empty() && a.tcp_server.empty()) command.insert(command.end(), {"--report-dir", a.report_dir});
  if (a.disable_ll_nvlink) command.emplace_back("--disable-ll-nvlink");
  if (a.validate_phase_failures) command.emplace_back("--validate-phase-failures");
  if (::access(command[0].c_str(), X_OK) != 0)
    throw hyrun::UsageError(
        fmt::format("ep-bench is not at '{}' (it is installed beside ep-elastic; or set HYRUN_EP_BENCH)", command[0]));
  return command;
}

/// What this launch is: its ranks, the plan's first phase, the join server, the token.
hyrun::ep::elastic::StagedLaunchOptions staged_launch_options(const Arguments& a) {
  const auto parsed = hyrun::ElasticPlan::from_option(a.plan, 1 << 20);
  hyrun::ep::elastic::StagedLaunchOptions o;
  o.num_processes = a.num_processes;
  o.world_size = parsed.max_rank() + 1;
  o.first_phase = parsed.phase(0).active;
  o.tcp_server = a.tcp_server;
  o.port = a.port;
  o.timeout_ms = a.timeout_ms;
  o.restart_returning = a.restart_returning;
  if (const char* t = std::getenv(hyrun::env::kEpToken); t && *t) {
    o.token = t;
  } else {
    o.token_file = a.token_file.empty() ? default_token_file(a.plan, a.port) : a.token_file;
    o.token = a.tcp_server.empty() ? hyrun::make_job_token() : hyrun::ep::elastic::read_token_file(o.token_file);
  }
  o.launch.bootstrap_timeout = std::chrono::milliseconds(static_cast<long long>(a.bootstrap_timeout_s * 1000));
  o.launch.log_level = hyrun::log_level_from_environment("warn");
  o.launch.command = ep_bench_command(a);
  return o;
}

/// Runs this launch: the first one (rank 0, the join server) or one that joins.
int run(const Arguments& a) {
  // A launcher too: its log must not block on a stalled stderr (OwnStderr).
  hyrun::init_logging("ep-elastic", hyrun::log_level_from_environment("warn"), hyrun::own_stderr_log_sink());
  auto o = staged_launch_options(a);
  auto signals = hyrun::prepare_launcher_process();
  const int code = a.tcp_server.empty() ? hyrun::ep::elastic::run_first_launch(std::move(o), signals)
                                        : hyrun::ep::elastic::run_joining_launch(std::move(o), signals);
  if (code != 0) report_failed_launch(code);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  Arguments arguments;
  CLI::App app{"ep-elastic: the NIXL Elastic EP benchmark's command line (elastic.py), run by hyrun"};
  // hyrun's --help layout: placeholders and defaults, without CLI11's "INT:INT in [1 - 4096]".
  app.formatter(std::make_shared<hyrun::HelpFormatter>(
      "ep-elastic --plan PLAN [--num-processes K] [--tcp-server ADDR] [options]"));
  add_options(app, arguments);
  if (const auto done = hyrun::ep::tools::parse_command_line(app, argc, argv, "ep-elastic")) return *done;
  try {
    return run(arguments);
  } catch (const hyrun::Error& e) {
    hyrun::job_event_line(e.what());
    report_failed_launch(e.exit_code());
    return e.exit_code();
  } catch (const std::exception& e) {
    hyrun::job_event("internal error: {}", e.what());
    report_failed_launch(hyrun::exit_code::kLauncherError);
    return hyrun::exit_code::kLauncherError;
  }
}
