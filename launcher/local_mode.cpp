#include "launcher/local_mode.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <signal.h>
#include <unistd.h>

#include "hyrun/common/env_contract.hpp"
#include "hyrun/common/error.hpp"
#include "hyrun/common/job_token.hpp"
#include "launcher/master_endpoint.hpp"
#include "launcher/node_launch.hpp"
#include "launcher/wait_status.hpp"
#include "launcher/rank_supervisor.hpp"

namespace hyrun {

int run_local(const LaunchOptions& options, SignalEvents& signals) {
  RankEnvironment contract;
  contract.world_size = options.ranks;
  contract.local_world_size = options.ranks;
  contract.job_token = make_job_token();
  contract.bootstrap_timeout_ms = static_cast<int>(options.bootstrap_timeout.count());
  contract.output_terminal = ::isatty(STDOUT_FILENO) == 1;
  NodeLaunch node(options, contract, 0);
  // One node: loopback is reachable by every rank, and gloo finds its own interface.
  try {
    node.set_rendezvous("127.0.0.1", pick_free_tcp_port(), fmt::format("hyrun-local-{}", ::getpid()), "");
  } catch (const SystemError& e) {  // only programs with their own bootstrap need it
    spdlog::warn("MASTER_ADDR/MASTER_PORT are not set: {}", e.what());
  }
  // The plan of many ranks takes a while and the loop is not running yet: a signal that
  // came meanwhile ends hyrun here, before anything is started or printed.
  if (const auto sig = signals.pending_stop())
    throw Error(fmt::format("received {} while computing the binding plan; nothing was started", signal_name(*sig)),
                128 + *sig);
  if (node.report_and_check()) return exit_code::kSuccess;  // --dry-run

  RankSupervisor supervisor(supervisor_options(options), signals);
  supervisor.set_relauncher([&node](int local_rank, int incarnation) { return node.rank(local_rank, false, incarnation); });
  try {
    if (options.bootstrap == BootstrapMode::kUcx) {
      supervisor.start(node.rank(0, true));
      const auto root_address = supervisor.await_root_address();
      if (root_address) node.set_root_address(*root_address);
      for (int rank = 1; root_address && rank < options.ranks && !supervisor.stopping(); ++rank)
        supervisor.start(node.rank(rank, false));
    } else {
      for (int rank = 0; rank < options.ranks && !supervisor.stopping(); ++rank) supervisor.start(node.rank(rank, false));
    }
  } catch (const Error& e) {
    supervisor.stop(SIGTERM, e.exit_code());  // stop and reap what did start before the error is reported
    supervisor.finish();
    throw;
  }
  return supervisor.finish();
}

}  // namespace hyrun
