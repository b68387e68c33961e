#include "staged_launch.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>

#include "hyrun/common/env_contract.hpp"
#include "hyrun/common/error.hpp"
#include "hyrun/launcher/early_start.hpp"
#include "hyrun/launcher/node_launch.hpp"
#include "hyrun/launcher/rank_supervisor.hpp"
#include "hyrun/process/wait_status.hpp"
#include "join_protocol.hpp"
#include "token_file.hpp"

namespace hyrun::ep::elastic {
namespace {

std::string host_name() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

/// Runs the supervisor's loop to the end; stops what started when starting fails.
template <typename StartAll>
int supervise(RankSupervisor& supervisor, StartAll start_all) {
  try {
    start_all();
  } catch (const Error& e) {
    supervisor.stop(SIGTERM, e.exit_code());
    supervisor.finish();
    throw;
  }
  return supervisor.finish().exit_code;
}

}  // namespace

int run_first_launch(StagedLaunchOptions o, SignalEvents& signals) {
  const int launch_ranks = std::min(o.num_processes, o.world_size);
  if (o.num_processes > o.world_size)
    spdlog::warn("--num-processes {}: the plan has {} ranks; {} process(es) would have no rank and are not started",
                 o.num_processes, o.world_size, o.num_processes - o.world_size);
  std::vector<int> start;
  for (int r : o.first_phase)
    if (r < launch_ranks) start.push_back(r);
  std::sort(start.begin(), start.end());
  o.launch.ranks = launch_ranks;
  o.launch.command.insert(o.launch.command.end(),
                          {"--launch-ranks", std::to_string(launch_ranks), "--join-port", std::to_string(o.port)});
  if (o.restart_returning) o.launch.command.emplace_back("--restart-returning");

  // Later launches may run on other nodes: at least 2 nodes, so that rank 0's UCX listens
  // beyond the loopback interface (a one-node World uses "lo" only).
  RankEnvironment contract = launch_contract(
      o.launch,
      LaunchPlace{.world_size = o.world_size, .local_world_size = launch_ranks, .node_rank = 0, .num_nodes = 2});
  contract.job_token = o.token;
  contract.start_ranks = start;
  NodeLaunch node(o.launch, contract, 0);
  if (node.report_and_check()) return exit_code::kSuccess;
  // Written before rank 0 starts: a later launch that finds the port open finds the token.
  if (!o.token_file.empty()) write_token_file(o.token_file, o.token);
  RankSupervisor supervisor(supervisor_options(o.launch), signals);
  supervisor.set_rank_starter([&](int global_rank, int incarnation) {
    if (global_rank >= launch_ranks)
      throw Error(fmt::format("rank {} is not one of this launch's ranks (0..{}); a later launch brings it",
                              global_rank, launch_ranks - 1));
    return node.rank(global_rank, false, incarnation);
  });
  int code = exit_code::kLauncherError;
  try {
    // Rank 0 first; the others as soon as it says it loaded the worker library, their root
    // address to come, as hyrun's own launch starts them (early_start.hpp).
    std::vector<int> others;
    for (int r : start)
      if (r != 0) others.push_back(r);
    EarlyStart early(node, others);
    code = supervise(supervisor, [&] {
      supervisor.start(node.rank(0, true));
      const auto root_address = supervisor.await_root_address([&] { early.start(supervisor); });
      if (!root_address) return;
      node.set_root_address(*root_address);
      early.finish(supervisor);
    });
  } catch (...) {
    if (!o.token_file.empty()) remove_token_file(o.token_file, o.token);
    throw;
  }
  if (!o.token_file.empty()) remove_token_file(o.token_file, o.token);
  return code;
}

int run_joining_launch(StagedLaunchOptions o, SignalEvents& signals) {
  const std::string host = host_name();
  // Nothing is started yet: a stop signal ends the wait for the join server at once.
  const auto check_stop = [&] {
    if (const auto sig = signals.pending_stop())
      throw Error(fmt::format("received {} while waiting for the join server at {}:{}; nothing was started",
                              signal_name(*sig), o.tcp_server, o.port),
                  128 + *sig);
  };
  spdlog::info("asking the join server at {}:{} for {} rank(s)", o.tcp_server, o.port, o.num_processes);
  // Held open until this launch ends: if it ends before its ranks joined, the job gets them back.
  const join::Membership membership = join::request_ranks(o.tcp_server, o.port, o.token, o.num_processes, host,
                                                          std::chrono::milliseconds(o.timeout_ms), check_stop);
  const join::Grant& grant = membership.grant;
  if (grant.world_size != o.world_size)
    throw UsageError(
        fmt::format("the job at {} runs a plan of {} ranks, --plan here has {}: give every launch the same "
                    "--plan",
                    o.tcp_server, grant.world_size, o.world_size));
  spdlog::info("joined the job at {}:{} with rank(s) {}", o.tcp_server, o.port, fmt::join(grant.ranks, ", "));
  // The binding plan covers the host's slots up to the highest one given here: local rank i
  // gets what a launch of that many ranks would give its rank i (GPU i by default), so the
  // ranks of launches sharing a node do not share GPUs (the reference's local ranks).
  const int slots = *std::max_element(grant.local_ranks.begin(), grant.local_ranks.end()) + 1;
  o.launch.ranks = slots;
  o.launch.command.insert(o.launch.command.end(), {"--launch-ranks", std::to_string(grant.launch_ranks)});
  RankEnvironment contract = launch_contract(o.launch, LaunchPlace{.world_size = grant.world_size,
                                                                   .local_world_size = slots,
                                                                   .node_rank = grant.node_rank,
                                                                   .num_nodes = std::max(2, grant.node_rank + 1)});
  contract.job_token = o.token;
  contract.root_address_hex = grant.root_address;
  contract.start_ranks = {0};  // these ranks were not at the World's start: they join late
  NodeLaunch node(o.launch, contract, 0);
  std::vector<int> by_slot(static_cast<std::size_t>(slots), -1);
  for (std::size_t i = 0; i < grant.ranks.size(); ++i) by_slot[grant.local_ranks[i]] = grant.ranks[i];
  node.set_global_ranks(by_slot);
  if (node.report_and_check()) return exit_code::kSuccess;
  RankSupervisor supervisor(supervisor_options(o.launch), signals);
  return supervise(supervisor, [&] {
    for (int slot : grant.local_ranks)
      if (!supervisor.stopping()) supervisor.start(node.rank(slot, false));
  });
}

}  // namespace hyrun::ep::elastic
