#include "launcher/node_launch.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "launcher/rank_environment.hpp"

namespace hyrun {
namespace {

binding::BindingOptions with_share(binding::BindingOptions options, binding::NodeTaskShare share) {
  options.node_share = share;
  return options;
}

}  // namespace

NodeLaunch::NodeLaunch(const LaunchOptions& options, RankEnvironment contract, int rank_offset,
                       binding::NodeTaskShare share)
    : options_(options),
      contract_(std::move(contract)),
      rank_offset_(rank_offset),
      exports_(resolve_exports(options.exported)),
      plan_(binding::BindingPlan::compute(with_share(options.binding, share), options.ranks)) {}

bool NodeLaunch::report_and_check() {
  switch (options_.binding.report) {
    case binding::ReportFormat::table:
      std::fputs(plan_.report_table(rank_offset_).c_str(), stdout);
      break;
    case binding::ReportFormat::json:
      std::puts(plan_.report_json(rank_offset_).dump(2).c_str());
      break;
    case binding::ReportFormat::none:
      break;
  }
  std::fflush(stdout);
  if (options_.dry_run) return true;
  plan_.require_applicable();
  return false;
}

void NodeLaunch::set_rendezvous(std::string master_addr, int master_port, std::string run_id, std::string interface) {
  contract_.master_addr = std::move(master_addr);
  contract_.master_port = master_port;
  contract_.run_id = std::move(run_id);
  node_defaults_.clear();
  if (!interface.empty()) node_defaults_.emplace_back("GLOO_SOCKET_IFNAME", std::move(interface));
}

RankLaunch NodeLaunch::rank(int local_rank, bool publishes_address, int incarnation) const {
  RankEnvironment e = contract_;
  e.incarnation = incarnation;
  e.local_rank = local_rank;
  e.rank = global_ranks_.empty() ? rank_offset_ + local_rank : global_ranks_.at(static_cast<std::size_t>(local_rank));
  const auto& placement = plan_.ranks().at(static_cast<std::size_t>(local_rank));
  RankLaunch launch;
  launch.global_rank = e.rank;
  launch.local_rank = local_rank;
  auto defaults = node_defaults_;
  // As many threads as the rank has CPUs, instead of every CPU of the node per rank.
  if (!placement.cpus.empty()) defaults.emplace_back(env::kOmpNumThreads, std::to_string(placement.cpus.size()));
  launch.environment = build_rank_environment(e, placement.environment, exports_, defaults);
  launch.publishes_address = publishes_address;
  launch.incarnation = incarnation;
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

}  // namespace hyrun
