#include "hyrun/launcher/cli_options.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "hyrun/common/error.hpp"
#include "hyrun/common/version.hpp"
#include "hyrun/launcher/exported_variables.hpp"
#include "hyrun/launcher/help_formatter.hpp"

namespace hyrun {
namespace {

constexpr const char* kExamples = R"(
Examples:
  hyrun -n 4 -- hello                          4 ranks on this machine (no PMIx server needed)
  hyrun -n 2 --label -x UCX_TLS=tcp -- hello   label output lines with the rank, pass UCX_TLS
  hyrun -n 3 --bootstrap=none -- /bin/hostname a program that does not use the worker library
  hyrun --topology dgx.xml -n 8 --dry-run --report-bindings
                                               the binding plan for another machine's topology
  srun --mpi=pmix -N 4 --ntasks-per-node=1 hyrun -n 8 -- prog
                                               hybrid mode: 8 ranks on each of 4 nodes

Exit status: 0 when every rank exits 0; otherwise the first failing rank's exit code
(128+N when it was killed by signal N); 1 launcher error; 2 usage error; 124 a time
limit was reached; 126 program not executable; 127 program not found.
See docs/cli.md for every option.)";

// Seconds as a finite number in [min, max]: the value becomes milliseconds in an int
// (HYRUN_BOOTSTRAP_TIMEOUT_MS) and a steady_clock deadline, so it must not overflow either.
CLI::Validator seconds_between(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size())
          return fmt::format("'{}' is not a number of seconds", text);
        if (!std::isfinite(v) || v < min || v > max)
          return fmt::format("{} is out of range: give seconds from {} to {}", text, min, max);
        return {};
      },
      "", "SECONDS");
}

// A duration in seconds from `min` to `max` (its help names the range), shown as S with its
// default: every time limit of the command line reads and checks the same way.
CLI::Option* add_seconds_option(CLI::App& app, const std::string& name, double& seconds, const std::string& help,
                                double min, double max) {
  return app.add_option(name, seconds, help)->check(seconds_between(min, max))->option_text("S")->capture_default_str();
}

// One word of `choices`, shown as "a|b|c" with its default: the words checked are the words shown.
CLI::Option* add_choice_option(CLI::App& app, const std::string& name, std::string& choice, const std::string& help,
                               const std::vector<std::string>& choices) {
  return app.add_option(name, choice, help)
      ->check(CLI::IsMember(choices))
      ->option_text(fmt::format("{}", fmt::join(choices, "|")))
      ->capture_default_str();
}

constexpr const char* kUsage = "hyrun -n N [options] -- program [args...]";

}  // namespace

CommandLine::CommandLine() : app_("hyrun: start the ranks of a job on this node, bound to their GPUs, CPUs and NICs") {
  app_.formatter(std::make_shared<HelpFormatter>(kUsage));
  app_.set_version_flag("--version", fmt::format("hyrun {}", kVersion));
  app_.footer(kExamples);
  app_.prefix_command();  // everything after the first positional (or "--") is the command
  // Not ->required(): an unknown option before -n must be named as such, not as a missing -n.
  app_.add_option("-n,--ranks", options_.ranks,
                  "number of ranks this hyrun starts (per node under a PMIx server); mpirun's -np N works too")
      ->option_text("N")
      ->check(CLI::Range(1, 1 << 20));
  add_choice_option(app_, "--mode", mode_name_,
                    "auto: hybrid mode under a PMIx server, local mode without one; local: ignore any PMIx server; "
                    "pmix: require a PMIx server",
                    {"auto", "local", "pmix"});
  add_choice_option(app_, "--bootstrap", bootstrap_name_,
                    "ucx: rank 0 publishes its UCX address and the others join it (programs using the hyrun worker "
                    "library); none: just start the program",
                    {"ucx", "none"});
  add_seconds_option(
      app_, "--bootstrap-timeout", bootstrap_timeout_s_,
      "seconds to wait for rank 0's address, for joins, for a rank's PMIx handshake and for its PMIx_Finalize "
      "to be read (0.001 to 86400)",
      0.001, 86400);
  add_seconds_option(app_, "--grace-period", grace_period_s_,
                     "seconds between forwarding SIGTERM/SIGINT/SIGHUP (or stopping after a failure) and SIGKILL "
                     "(0 to 86400)",
                     0, 86400);
  add_seconds_option(app_, "--node-timeout", node_timeout_s_,
                     "seconds another node's hyrun may stay silent before it is taken for lost (off the network, or "
                     "stopped); a closed link is a loss at once (0.1 to 86400)",
                     0.1, 86400);
  app_.add_flag("-l,--label,--tag-output", options_.label, "prefix every output line with the rank (\"3: ...\")");
  app_.add_flag("--timestamp-output", options_.timestamp_output,
                "prefix every output line with the UTC time hyrun forwarded it (\"2026-01-02T03:04:05.678Z ...\")");
  app_.add_option(
          "--output-filename", options_.output_filename,
          "also write every rank's output, unprefixed, to DIR/rank.N/stdout and DIR/rank.N/stderr (created; truncated)")
      ->option_text("DIR");
  // -x and --export append in command-line order to the same list.
  app_.add_option_function<std::string>(
          "-x", [this](const std::string& item) { options_.exported.push_back(item); },
          "pass VAR=value (taken whole, commas included), or VAR with hyrun's own value, to every rank (repeatable)")
      ->option_text("VAR[=value]")
      ->trigger_on_parse();
  app_.add_option_function<std::string>(
          "--export", [this](const std::string& list) { add_export_list(list); },
          "srun's form: a comma-separated list of VAR=value or VAR (ALL is accepted and changes nothing: every rank "
          "gets hyrun's environment; NONE is refused)")
      ->option_text("VAR[=value][,...]")
      ->trigger_on_parse();
  app_.add_option("--max-restarts", options_.max_restarts,
                  "times each rank may be restarted at its own request (a planned exit with restart); one more "
                  "request fails the job")
      ->check(CLI::Range(0, 1 << 20))
      ->option_text("N")
      ->capture_default_str();
  app_.add_flag("--dry-run", options_.dry_run,
                "compute the binding plan (see --report-bindings), start nothing, exit 0");
  app_.add_flag("--timings", options_.timings,
                "when the job ends, print when each step of this node's launch was done (ms from its start)");
  add_choice_option(app_, "--mps", mps_name_,
                    "auto: when ranks of this hyrun share a GPU and no MPS daemon runs, start a private one for the "
                    "job (else they take turns on the GPU); on: always, and fail if it cannot; off: never (a warning "
                    "when ranks share a GPU without one)",
                    {"auto", "on", "off"});
  add_choice_option(app_, "--fences", fences_name_,
                    "hybrid mode: how the ranks' PMIx fences (MPI_Init, MPI_Finalize) and PMI barriers cross nodes; "
                    "outer: through the PMIx fence of the launcher above (srun's, mpirun's), along its tree; link: "
                    "over hyrun's own node link, a star whose hub is the first task's hyrun; auto: link up to 64 "
                    "nodes, outer beyond",
                    {"auto", "outer", "link"});
  app_.add_option("--tree-width", options_.tree_width,
                  "hybrid mode: how many other nodes' hyrun each hyrun watches at most (heartbeats, the node "
                  "timeout): the root the first N, each of those N more, and so on; the same on every node")
      ->check(CLI::Range(1, 1 << 20))
      ->option_text("N")
      ->capture_default_str();
  binding::add_binding_options(app_, options_.binding);
  app_.add_option("--log-level", options_.log_level, "trace, debug, info, warn, error, critical or off")
      ->option_text("LEVEL")
      ->capture_default_str();
}

void CommandLine::add_export_list(const std::string& list) {
  // srun splits at commas (so a value cannot hold one) and knows the words ALL and NONE.
  if (list.empty()) throw CLI::ValidationError("--export", "an empty list; give VAR=value or VAR, comma-separated");
  std::size_t begin = 0;
  for (;;) {
    const std::size_t comma = list.find(',', begin);
    const std::string item = list.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    if (item == "NONE" || item == "NIL")
      throw CLI::ValidationError("--export", fmt::format("--export={}: hyrun always passes its own environment to the "
                                                         "ranks, so {} is not supported; unset variables before hyrun "
                                                         "(env -u VAR hyrun ...)",
                                                         list, item));
    if (item != "ALL") {
      if (!valid_variable_name(item.substr(0, item.find('='))))
        throw CLI::ValidationError(
            "--export", fmt::format("--export={}: '{}' is not VAR or VAR=value; --export splits at commas as srun's "
                                    "does, so a value with a comma must be given as -x VAR=value",
                                    list, item));
      options_.exported.push_back(item);
    }
    if (comma == std::string::npos) return;
    begin = comma + 1;
  }
}

std::vector<std::string> CommandLine::with_mpirun_spellings(std::vector<std::string> args) const {
  // Only hyrun's own options are looked at: the walk stops at "--", at the program (the
  // first word that is not an option or an option's value) and at an unknown option.
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string& word = args[i];
    if (word == "--" || word.size() < 2 || word[0] != '-') break;
    if (word == "-np") {
      word = "-n";
      ++i;  // its value
      continue;
    }
    // "--name=value" and "-nVALUE" carry their value.
    if (word.find('=') != std::string::npos || (word[1] != '-' && word.size() > 2)) continue;
    const CLI::Option* option = app_.get_option_no_throw(word);
    if (!option) break;
    if (option->get_expected_min() > 0) ++i;  // skip its value
  }
  return args;
}

std::optional<int> CommandLine::parse(int argc, char** argv) {
  std::vector<std::string> args = with_mpirun_spellings(std::vector<std::string>(argv + 1, argv + argc));
  try {
    std::reverse(args.begin(), args.end());  // CLI11 takes a vector last word first
    app_.parse(args);
  } catch (const CLI::Success& e) {
    return app_.exit(e);  // --help / --version
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "hyrun: %s; see hyrun --help\n", e.what());
    return exit_code::kUsage;
  }
  options_.command = app_.remaining();
  if (!options_.command.empty() && options_.command.front() != "--" && options_.command.front().size() > 1 &&
      options_.command.front()[0] == '-') {
    // CLI11 hands an unknown option over as the start of the program; it never is one.
    const std::string& word = options_.command.front();
    std::fprintf(stderr,
                 "hyrun: unknown option '%s' before the program; see hyrun --help (a program whose name starts "
                 "with '-' goes after --)\n",
                 word.substr(0, word.find('=')).c_str());
    return exit_code::kUsage;
  }
  if (!options_.command.empty() && options_.command.front() == "--") options_.command.erase(options_.command.begin());
  if (app_.count("--ranks") == 0) {
    std::fprintf(stderr, "hyrun: --ranks is required: give the number of ranks with -n N; usage: %s\n", kUsage);
    return exit_code::kUsage;
  }
  if (options_.command.empty()) {
    std::fprintf(stderr, "hyrun: no program given; usage: %s\n", kUsage);
    return exit_code::kUsage;
  }
  options_.mode = mode_name_ == "local"  ? LaunchMode::kLocal
                  : mode_name_ == "pmix" ? LaunchMode::kPmix
                                         : LaunchMode::kAuto;
  options_.bootstrap = bootstrap_name_ == "none" ? BootstrapMode::kNone : BootstrapMode::kUcx;
  options_.mps = mps_name_ == "on" ? MpsMode::kOn : mps_name_ == "off" ? MpsMode::kOff : MpsMode::kAuto;
  options_.fences = fences_name_ == "link"    ? FenceRoute::kLink
                    : fences_name_ == "outer" ? FenceRoute::kOuter
                                              : FenceRoute::kAuto;
  options_.bootstrap_timeout = std::chrono::milliseconds(std::lround(bootstrap_timeout_s_ * 1000));
  options_.grace_period = std::chrono::milliseconds(std::lround(grace_period_s_ * 1000));
  options_.node_timeout = std::chrono::milliseconds(std::lround(node_timeout_s_ * 1000));
  return std::nullopt;
}

}  // namespace hyrun
