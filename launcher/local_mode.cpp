#include "launcher/local_mode.hpp"

#include "hyrun/common/env_contract.hpp"
#include "hyrun/common/job_token.hpp"
#include "launcher/rank_environment.hpp"
#include "launcher/rank_supervisor.hpp"

namespace hyrun {

int run_local(const LaunchOptions& options, SignalEvents& signals) {
  const auto exports = resolve_exports(options.exported);
  RankEnvironment contract;
  contract.world_size = options.ranks;
  contract.local_world_size = options.ranks;
  contract.job_token = make_job_token();
  contract.bootstrap_timeout_ms = static_cast<int>(options.bootstrap_timeout.count());

  RankSupervisor supervisor(options, signals);
  auto launch = [&](int rank, bool publishes) {
    RankEnvironment e = contract;
    e.rank = e.local_rank = rank;
    supervisor.start({rank, rank, build_rank_environment(e, {}, exports), publishes, {}});
  };

  try {
    if (options.bootstrap == BootstrapMode::kUcx) {
      launch(0, true);
      const auto root_address = supervisor.await_root_address();
      contract.root_address_hex = root_address;
      for (int rank = 1; root_address && rank < options.ranks && !supervisor.stopping(); ++rank) launch(rank, false);
    } else {
      for (int rank = 0; rank < options.ranks && !supervisor.stopping(); ++rank) launch(rank, false);
    }
  } catch (const Error&) {
    supervisor.finish();  // stop and reap what did start before the error is reported
    throw;
  }
  return supervisor.finish();
}

}  // namespace hyrun
