#include "launcher/cli_options.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "hyrun/common/error.hpp"
#include "hyrun/common/version.hpp"

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

bool valid_variable_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

}  // namespace

CommandLine::CommandLine() : app_("hyrun: start the ranks of a job on this node, bound to their GPUs, CPUs and NICs") {
  app_.set_version_flag("--version", fmt::format("hyrun {}", kVersion));
  app_.footer(kExamples);
  app_.prefix_command();  // everything after the first positional (or "--") is the command
  app_.add_option("-n,--ranks", options_.ranks, "number of ranks this hyrun starts (per node under a PMIx server)")
      ->required()
      ->check(CLI::Range(1, 1 << 20));
  app_.add_option("--mode", mode_name_,
                  "auto: hybrid mode under a PMIx server, local mode without one; local: ignore any PMIx server; "
                  "pmix: require a PMIx server")
      ->check(CLI::IsMember({"auto", "local", "pmix"}))
      ->capture_default_str();
  app_.add_option("--bootstrap", bootstrap_name_,
                  "ucx: rank 0 publishes its UCX address and the others join it (programs using the hyrun worker "
                  "library); none: just start the program")
      ->check(CLI::IsMember({"ucx", "none"}))
      ->capture_default_str();
  app_.add_option("--bootstrap-timeout", bootstrap_timeout_s_,
                  "seconds to wait for rank 0's address and for joins")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app_.add_option("--grace-period", grace_period_s_,
                  "seconds between forwarding SIGTERM/SIGINT/SIGHUP (or stopping after a failure) and SIGKILL")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app_.add_flag("--label,--tag-output", options_.label, "prefix every output line with the rank (\"3: ...\")");
  app_.add_option("-x,--export", options_.exported,
                  "pass VAR=value, or VAR with hyrun's own value, to every rank (repeatable)")
      ->allow_extra_args(false);
  app_.add_flag("--dry-run", options_.dry_run,
                "compute the binding plan (see --report-bindings), start nothing, exit 0");
  binding::add_binding_options(app_, options_.binding);
  app_.add_option("--log-level", options_.log_level, "trace, debug, info, warn, error, critical or off")
      ->capture_default_str();
}

std::optional<int> CommandLine::parse(int argc, char** argv) {
  try {
    app_.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app_.exit(e);  // --help / --version
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "hyrun: %s; see hyrun --help\n", e.what());
    return exit_code::kUsage;
  }
  options_.command = app_.remaining();
  if (!options_.command.empty() && options_.command.front() == "--") options_.command.erase(options_.command.begin());
  if (options_.command.empty()) {
    std::fprintf(stderr, "hyrun: no program given; usage: hyrun -n N [options] -- program [args...]\n");
    return exit_code::kUsage;
  }
  options_.mode = mode_name_ == "local" ? LaunchMode::kLocal : mode_name_ == "pmix" ? LaunchMode::kPmix : LaunchMode::kAuto;
  options_.bootstrap = bootstrap_name_ == "none" ? BootstrapMode::kNone : BootstrapMode::kUcx;
  options_.bootstrap_timeout = std::chrono::milliseconds(static_cast<long>(bootstrap_timeout_s_ * 1000));
  options_.grace_period = std::chrono::milliseconds(static_cast<long>(grace_period_s_ * 1000));
  return std::nullopt;
}

std::vector<std::string> resolve_exports(const std::vector<std::string>& exported) {
  std::vector<std::string> out;
  for (const auto& item : exported) {
    const auto eq = item.find('=');
    const std::string name = item.substr(0, eq);
    if (!valid_variable_name(name))
      throw UsageError(fmt::format("-x '{}': '{}' is not a variable name (letters, digits and _, not starting with a digit)",
                                   item, name));
    if (eq != std::string::npos) {
      out.push_back(item);
      continue;
    }
    const char* value = std::getenv(name.c_str());
    if (!value)
      throw UsageError(fmt::format("-x {}: {} is not set in hyrun's environment; give a value with -x {}=value", name,
                                   name, name));
    out.push_back(name + "=" + value);
  }
  return out;
}

}  // namespace hyrun
