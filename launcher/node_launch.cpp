#include "hyrun/launcher/node_launch.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "hyrun/binding/topology_cache.hpp"
#include "hyrun/common/error.hpp"
#include "hyrun/launcher/exported_variables.hpp"
#include "hyrun/launcher/mps_check.hpp"
#include "hyrun/launcher/outer_identity.hpp"
#include "hyrun/launcher/rank_environment.hpp"
#include "hyrun/process/open_file_limit.hpp"
#include "hyrun/process/private_directory.hpp"

namespace hyrun {
namespace {

// The options for this node: its share of the node, and the topology cache of this user.
binding::BindingOptions for_this_node(binding::BindingOptions options, binding::NodeTaskShare share) {
  options.node_share = share;
  options.topology_cache = binding::topology_cache_directory(PrivateDirectory::temporary_root());
  return options;
}

}  // namespace

RankEnvironment launch_contract(const LaunchOptions& options, const LaunchPlace& place) {
  RankEnvironment contract;
  contract.world_size = place.world_size;
  contract.local_world_size = place.local_world_size;
  contract.node_rank = place.node_rank;
  contract.num_nodes = place.num_nodes;
  contract.bootstrap_timeout_ms = static_cast<int>(options.bootstrap_timeout.count());
  contract.output_terminal = ::isatty(STDOUT_FILENO) == 1;
  return contract;
}

NodeLaunch::NodeLaunch(const LaunchOptions& options, RankEnvironment contract, int rank_offset,
                       binding::NodeTaskShare share)
    : options_(options),
      contract_(std::move(contract)),
      rank_offset_(rank_offset),
      exports_(resolve_exports(options.exported)),
      plan_(binding::BindingPlan::compute(for_this_node(options.binding, share), options.ranks)),
      node_tasks_(share.count) {}

bool NodeLaunch::report_and_check() {
  switch (options_.binding.report) {
    case binding::ReportFormat::kTable: std::fputs(plan_.report_table(rank_offset_).c_str(), stdout); break;
    case binding::ReportFormat::kJson: std::puts(plan_.report_json(rank_offset_).dump(2).c_str()); break;
    case binding::ReportFormat::kNone: break;
  }
  std::fflush(stdout);
  if (options_.dry_run) return true;
  plan_.require_applicable();
  arrange_mps();
  return false;
}

void NodeLaunch::arrange_mps() {
  const auto sharing = first_shared_gpu(plan_.ranks(), rank_offset_);
  const auto dir = mps_pipe_directory();
  const bool on = options_.mps == MpsMode::kOn;
  if ((!sharing && !on) || mps_daemon_answers(dir)) return;  // nothing to do, or the ranks find the daemon
  // Why no private daemon: --mps on fails; otherwise the ranks' sharing is warned about.
  auto cannot = [&](const std::string& why) {
    if (on) throw Error(fmt::format("--mps on: {}", why));
    if (sharing) spdlog::warn("{} ({})", shared_gpu_warning(*sharing, dir), why);
  };
  if (options_.mps == MpsMode::kOff) return cannot("--mps off");
  const char* user_dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  if (user_dir != nullptr && *user_dir != '\0')
    return cannot(
        fmt::format("CUDA_MPS_PIPE_DIRECTORY is set to {}, where no daemon answers; hyrun starts a "
                    "private daemon only when it is unset",
                    user_dir));
  if (!on && node_tasks_ > 1)
    return cannot(
        fmt::format("{} hyrun tasks of the job share this node: start one daemon for all of them", node_tasks_));
  const std::string control = find_mps_control();
  if (control.empty()) return cannot("nvidia-cuda-mps-control is not in PATH");
  try {
    mps_ = MpsDaemon::start(control, std::chrono::seconds(10));
  } catch (const Error& e) {
    return cannot(e.what());
  }
  mps_env_ = mps_->client_environment();
  spdlog::warn("{}: hyrun started a private MPS daemon for this job (pipe {}; --mps off to not)",
               sharing
                   ? fmt::format("ranks {} share the GPU at {}", fmt::join(sharing->ranks, ","), sharing->pci_bus_id)
                   : std::string("--mps on"),
               mps_->pipe_directory());
}

void NodeLaunch::set_rendezvous(std::string master_addr, int master_port, std::string run_id, std::string interface) {
  contract_.master_addr = std::move(master_addr);
  contract_.master_port = master_port;
  contract_.run_id = std::move(run_id);
  node_defaults_.clear();
  if (!interface.empty()) node_defaults_.emplace_back("GLOO_SOCKET_IFNAME", std::move(interface));
}

RankEnvironment NodeLaunch::contract_of(RankEnvironment e, int local_rank) const {
  e.local_rank = local_rank;
  e.rank = global_ranks_.empty() ? rank_offset_ + local_rank : global_ranks_.at(static_cast<std::size_t>(local_rank));
  return e;
}

std::vector<std::string> NodeLaunch::environment_of(
    const RankEnvironment& e, int local_rank,
    const std::vector<std::pair<std::string, std::string>>& node_defaults) const {
  const auto& placement = plan_.ranks().at(static_cast<std::size_t>(local_rank));
  auto defaults = node_defaults;
  defaults.insert(defaults.end(), mps_env_.begin(), mps_env_.end());
  // As many threads as the rank has CPUs, instead of every CPU of the node per rank.
  if (!placement.cpus.empty()) defaults.emplace_back(env::kOmpNumThreads, std::to_string(placement.cpus.size()));
  auto own = placement.environment;  // the user's -x exports still win over these
  const auto identity = OuterIdentity::of_this_process(e.world_size, e.local_world_size).for_rank(e.rank, local_rank);
  own.insert(own.end(), identity.begin(), identity.end());
  for (const RankService* service : services_) {
    const auto variables = service->rank_variables(e.rank);
    own.insert(own.end(), variables.begin(), variables.end());
    const auto service_defaults = service->rank_defaults();
    defaults.insert(defaults.end(), service_defaults.begin(), service_defaults.end());
  }
  return build_rank_environment(e, own, exports_, defaults);
}

RankLaunch NodeLaunch::rank(int local_rank, bool publishes_address, int incarnation) const {
  RankEnvironment e = contract_of(contract_, local_rank);
  e.incarnation = incarnation;
  if (!publishes_address) e.root_pending_dir = root_pending_dir_;
  RankLaunch launch;
  launch.global_rank = e.rank;
  launch.local_rank = local_rank;
  launch.environment = environment_of(e, local_rank, node_defaults_);
  launch.publishes_address = publishes_address;
  launch.incarnation = incarnation;
  launch.own_pid_variable = OuterIdentity::of_this_process(e.world_size, e.local_world_size).pid_variable();
  for (RankService* service : services_) try {
      if (auto descriptor = service->rank_descriptor(e.rank)) launch.inherited_fds.push_back(std::move(*descriptor));
    } catch (const SystemError& error) {
      if (error.errnum() != EMFILE && error.errnum() != ENFILE) throw;
      throw Error(describe_fd_exhaustion(e.rank), exit_code::kLauncherError);
    }
  // Runs in the forked child: only the plain-data binding and system calls.
  launch.pre_exec = [binding = plan_.child_binding(local_rank)](char* message, std::size_t length) {
    const int rc = binding::apply_child_binding(binding, message, length);
    if (rc == 0 && message[0] != '\0') {
      static constexpr char kPrefix[] = "hyrun: warning: ";
      [[maybe_unused]] ssize_t a = ::write(2, kPrefix, sizeof kPrefix - 1);
      [[maybe_unused]] ssize_t b = ::write(2, message, std::strlen(message));
      [[maybe_unused]] ssize_t c = ::write(2, "\n", 1);
    }
    return rc;
  };
  return launch;
}

void NodeLaunch::defer_root(const std::string& pending_dir) {
  root_pending_dir_ = pending_dir;
  if (!pending_dir.empty()) {
    early_ = EarlyStart{contract_, node_defaults_};
    early_->contract.root_pending_dir = pending_dir;
  }
}

std::vector<std::string> NodeLaunch::pending_environment(int local_rank) const {
  if (!early_) return {};
  const auto now = environment_of(contract_of(contract_, local_rank), local_rank, node_defaults_);
  const RankEnvironment then = contract_of(early_->contract, local_rank);
  const auto started = environment_of(then, local_rank, early_->node_defaults);
  const std::set<std::string> had(started.begin(), started.end());
  std::vector<std::string> missing;
  for (const auto& entry : now)
    if (!had.contains(entry)) missing.push_back(entry);
  return missing;
}

}  // namespace hyrun
