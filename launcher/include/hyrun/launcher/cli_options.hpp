#pragma once
// hyrun's command line: `hyrun [options] -- program [args...]`. docs/cli.md is the reference.
// Only the parsing includes this header (it brings CLI11); the launch reads launch_options.hpp.
#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hyrun/launcher/launch_options.hpp"

namespace hyrun {

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
  double node_timeout_s_ = std::chrono::duration<double>(kDefaultNodeTimeout).count();
  std::string bootstrap_name_ = "ucx";
  std::string mode_name_ = "auto";
  std::string mps_name_ = "auto";
  std::string fences_name_ = "auto";
};

}  // namespace hyrun
