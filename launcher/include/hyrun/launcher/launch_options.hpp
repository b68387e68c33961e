#pragma once
// What hyrun was asked to do, as plain data: filled by the command line (cli_options.hpp),
// read by the launch. docs/cli.md is the reference for each option.
#include <chrono>
#include <string>
#include <vector>

#include "hyrun/binding/binding_options.hpp"
#include "hyrun/launcher/supervisor_options.hpp"

namespace hyrun {

enum class BootstrapMode { kUcx, kNone };
enum class LaunchMode { kAuto, kLocal, kPmix };
/// --mps: a private MPS daemon for ranks that share a GPU (launcher/mps_daemon.hpp).
enum class MpsMode { kAuto, kOn, kOff };
/// --fences: how the ranks' fences cross nodes in hybrid mode (launcher/outer_fence.hpp).
enum class FenceRoute { kAuto, kOuter, kLink };

/// How long another node's hyrun may stay silent before it is taken for lost (--node-timeout).
/// Long enough for a node that is only busy (a page-cache flush, a fork storm, a short
/// network stall: seconds) and still a small part of what Slurm waits for a node (minutes);
/// a hyrun that dies closes its link and is a loss at once (docs/cli.md, Failures).
inline constexpr std::chrono::seconds kDefaultNodeTimeout{30};
/// How many nodes' hyrun each hyrun watches at most on the node link (--tree-width;
/// launcher/link/link_tree.hpp): docs/performance.md, "The node link's tree", has the
/// measurement it was chosen by.
inline constexpr int kDefaultTreeWidth = 32;

struct LaunchOptions {
  int ranks = 0;  ///< -n: ranks this hyrun starts (per node in hybrid mode)
  LaunchMode mode = LaunchMode::kAuto;
  BootstrapMode bootstrap = BootstrapMode::kUcx;
  std::chrono::milliseconds bootstrap_timeout{60000};
  std::chrono::milliseconds grace_period{10000};
  std::chrono::milliseconds node_timeout{kDefaultNodeTimeout};  ///< --node-timeout
  bool label = false;
  bool timestamp_output = false;      ///< prefix every output line with the UTC time it was forwarded
  std::string output_filename;        ///< --output-filename DIR: also DIR/rank.N/stdout and stderr
  std::vector<std::string> exported;  ///< -x VAR or VAR=value, as given (--export lists split at commas)
  int max_restarts = 32;              ///< restarts each rank may ask for (planned exits with restart)
  std::string log_level = "warn";
  std::vector<std::string> command;       ///< the program and its arguments
  binding::BindingOptions binding;        ///< GPU/CPU/memory/NIC placement (docs/binding.md)
  bool dry_run = false;                   ///< compute and report the plan, start nothing
  bool timings = false;                   ///< --timings: print when each launch step was done
  MpsMode mps = MpsMode::kAuto;           ///< --mps auto|on|off
  FenceRoute fences = FenceRoute::kAuto;  ///< --fences auto|outer|link
  int tree_width = kDefaultTreeWidth;     ///< --tree-width
};

/// The options the rank supervisor acts on.
SupervisorOptions supervisor_options(const LaunchOptions& options);

}  // namespace hyrun
