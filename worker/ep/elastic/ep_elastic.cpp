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

#include "elastic_plan.hpp"
#include "hyrun/common/error.hpp"
#include "hyrun/common/job_token.hpp"
#include "hyrun/common/logging.hpp"
#include "hyrun/launcher/help_formatter.hpp"
#include "hyrun/process/job_events.hpp"
#include "hyrun/process/launcher_process.hpp"
#include "staged_launch.hpp"
#include "token_file.hpp"

namespace {

/// ep-bench beside this program (build tree and installation alike).
std::string ep_bench_path() {
  if (const char* p = std::getenv("HYRUN_EP_BENCH")) return p;
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

}  // namespace

int main(int argc, char** argv) {
  std::string plan = "plan.json";
  int num_processes = 8, num_tokens = 128, experts_per_rank = 2, hidden = 7168, topk = 8, timeout_ms = 30000;
  std::string tcp_server, token_file, backend = "auto", report_dir;
  bool kineto = false, disable_ll_nvlink = false, validate_phase_failures = false, restart_returning = false;
  int port = 9999, warmup = 50, iters = 50;
  double bootstrap_timeout_s = 60;

  CLI::App app{"ep-elastic: the NIXL Elastic EP benchmark's command line (elastic.py), run by hyrun"};
  // hyrun's --help layout: placeholders and defaults, without CLI11's "INT:INT in [1 - 4096]".
  app.formatter(std::make_shared<hyrun::HelpFormatter>(
      "ep-elastic --plan PLAN [--num-processes K] [--tcp-server ADDR] [options]"));
  app.add_option("--plan", plan, "plan file (a JSON list of phases), or the plan as JSON text")->capture_default_str();
  app.add_option("--num-processes", num_processes, "ranks this launch runs")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--num-tokens", num_tokens, "tokens per rank")->capture_default_str()->check(CLI::Range(1, 1 << 16));
  app.add_option("--num-experts-per-rank", experts_per_rank)->capture_default_str()->check(CLI::Range(1, 1024));
  app.add_option("--hidden-dim", hidden, "hidden size")->capture_default_str()->check(CLI::Range(128, 1 << 16));
  app.add_option("--num-topk", topk, "experts per token")->capture_default_str()->check(CLI::Range(1, 64));
  app.add_option("--tcp-server", tcp_server, "address of the first launch's node: join that job (no value: start it)");
  app.add_flag("--kineto", kineto, "also print dispatch and combine bandwidth apart");
  app.add_flag("--disable-ll-nvlink", disable_ll_nvlink, "no direct NVLink stores between ranks of a node");
  app.add_option("--timeout-ms", timeout_ms, "limit of every wait for a peer, and of a join")
      ->capture_default_str()
      ->check(CLI::Range(1, INT_MAX));
  app.add_flag("--validate-phase-failures", validate_phase_failures,
               "fail unless each phase's detected failures are exactly the ranks the plan killed");
  // hyrun's own, all optional: CloudAI passes unknown TOML keys as --key value.
  app.add_option("--port", port, "TCP port of the join server (the readiness probe)")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535));
  app.add_option("--token-file", token_file, "the job's token file (default: .hyrun-ep-token-PORT beside the plan)");
  app.add_flag("--restart-returning", restart_returning,
               "this launch starts again its own ranks that the plan brings back (one launch runs the whole plan)");
  app.add_option("--backend", backend, "auto, cuda or host")
      ->check(CLI::IsMember({"auto", "cuda", "host"}))
      ->capture_default_str();
  app.add_option("--warmup", warmup, "untimed iterations per phase")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--iters", iters, "timed iterations per phase")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  app.add_option("--report-dir", report_dir, "first launch: write results.json, plan.json and a plot here");
  app.add_option("--bootstrap-timeout", bootstrap_timeout_s, "seconds a rank may take to join the job")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 86400.0));
  // As argparse in elastic.py: a repeated option takes its last value.
  for (CLI::Option* option : app.get_options()) option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "ep-elastic: %s; see ep-elastic --help\n", e.what());
    return hyrun::exit_code::kUsage;
  }
  try {
    hyrun::init_logging("ep-elastic", hyrun::log_level_from_environment("warn"));
    const auto parsed = hyrun::ElasticPlan::from_option(plan, 1 << 20);
    hyrun::ep::elastic::StagedLaunchOptions o;
    o.num_processes = num_processes;
    o.world_size = parsed.max_rank() + 1;
    o.first_phase = parsed.phase(0).active;
    o.tcp_server = tcp_server;
    o.port = port;
    o.timeout_ms = timeout_ms;
    o.restart_returning = restart_returning;
    if (const char* t = std::getenv("HYRUN_EP_TOKEN"); t && *t) {
      o.token = t;
    } else {
      o.token_file = token_file.empty() ? default_token_file(plan, port) : token_file;
      o.token = tcp_server.empty() ? hyrun::make_job_token() : hyrun::ep::elastic::read_token_file(o.token_file);
    }
    o.launch.bootstrap_timeout = std::chrono::milliseconds(static_cast<long long>(bootstrap_timeout_s * 1000));
    o.launch.log_level = hyrun::log_level_from_environment("warn");
    o.launch.command = {ep_bench_path(),
                        "--plan",
                        plan,
                        "--num-tokens",
                        std::to_string(num_tokens),
                        "--num-experts-per-rank",
                        std::to_string(experts_per_rank),
                        "--hidden-dim",
                        std::to_string(hidden),
                        "--num-topk",
                        std::to_string(topk),
                        "--timeout-ms",
                        std::to_string(timeout_ms),
                        "--backend",
                        backend,
                        "--warmup",
                        std::to_string(warmup),
                        "--iters",
                        std::to_string(iters)};
    if (kineto) o.launch.command.emplace_back("--kineto");
    if (!report_dir.empty() && tcp_server.empty())
      o.launch.command.insert(o.launch.command.end(), {"--report-dir", report_dir});
    if (disable_ll_nvlink) o.launch.command.emplace_back("--disable-ll-nvlink");
    if (validate_phase_failures) o.launch.command.emplace_back("--validate-phase-failures");
    if (::access(o.launch.command[0].c_str(), X_OK) != 0)
      throw hyrun::UsageError(fmt::format(
          "ep-bench is not at '{}' (it is installed beside ep-elastic; or set HYRUN_EP_BENCH)", o.launch.command[0]));

    auto signals = hyrun::prepare_launcher_process();
    const int code = tcp_server.empty() ? hyrun::ep::elastic::run_first_launch(std::move(o), signals)
                                        : hyrun::ep::elastic::run_joining_launch(std::move(o), signals);
    if (code != 0) report_failed_launch(code);
    return code;
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
