#pragma once
// hyrun's command line: `hyrun [options] -- program [args...]`. docs/cli.md is the reference.
#include <CLI/CLI.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "hyrun/binding/binding_options.hpp"

namespace hyrun {

enum class BootstrapMode { kUcx, kNone };
enum class LaunchMode { kAuto, kLocal, kPmix };
/// --mps: a private MPS daemon for ranks that share a GPU (launcher/mps_daemon.hpp).
enum class MpsMode { kAuto, kOn, kOff };

struct LaunchOptions {
  int ranks = 0;  ///< -n: ranks this hyrun starts (per node in hybrid mode)
  LaunchMode mode = LaunchMode::kAuto;
  BootstrapMode bootstrap = BootstrapMode::kUcx;
  std::chrono::milliseconds bootstrap_timeout{60000};
  std::chrono::milliseconds grace_period{10000};
  bool label = false;
  bool timestamp_output = false;  ///< prefix every output line with the UTC time it was forwarded
  std::string output_filename;    ///< --output-filename DIR: also DIR/rank.N/stdout and stderr
  std::vector<std::string> exported;  ///< -x VAR or VAR=value, as given (--export lists split at commas)
  int max_restarts = 32;              ///< restarts each rank may ask for (planned exits with restart)
  std::string log_level = "warn";
  std::vector<std::string> command;   ///< the program and its arguments
  binding::BindingOptions binding;    ///< GPU/CPU/memory/NIC placement (docs/binding.md)
  bool dry_run = false;               ///< compute and report the plan, start nothing
  MpsMode mps = MpsMode::kAuto;       ///< --mps auto|on|off
};

/// Owns the CLI11 application so that other modules can register their options on it.
class CommandLine {
 public:
  CommandLine();
  CLI::App& app() { return app_; }
  LaunchOptions& options() { return options_; }

  /// Parses argv. Returns an exit code when hyrun should stop at once (--help, --version:
  /// 0 after printing; a usage error: 2 after printing one line naming the bad option or
  /// value), std::nullopt otherwise. mpirun's `-np N` is accepted as `-n N`; an unknown
  /// option before the program is a usage error, never taken for the program.
  std::optional<int> parse(int argc, char** argv);

 private:
  std::vector<std::string> with_mpirun_spellings(std::vector<std::string> args) const;
  void add_export_list(const std::string& list);

  CLI::App app_;
  LaunchOptions options_;
  double bootstrap_timeout_s_ = 60;
  double grace_period_s_ = 10;
  std::string bootstrap_name_ = "ucx";
  std::string mode_name_ = "auto";
  std::string mps_name_ = "auto";
};

/// The environment entries that -x adds: "VAR=value" as given, or "VAR=<hyrun's value>".
/// Throws UsageError for a malformed name or a VAR that hyrun's environment lacks.
std::vector<std::string> resolve_exports(const std::vector<std::string>& exported);

}  // namespace hyrun
