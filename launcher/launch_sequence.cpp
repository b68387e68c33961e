#include "hyrun/launcher/launch_sequence.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

#include "hyrun/common/error.hpp"
#include "hyrun/common/job_token.hpp"
#include "hyrun/launcher/master_endpoint.hpp"
#include "hyrun/launcher/node_launch.hpp"
#include "hyrun/launcher/node_link.hpp"
#include "hyrun/launcher/rank_supervisor.hpp"
#include "hyrun/process/job_events.hpp"
#include "hyrun/process/process_ancestry.hpp"
#include "hyrun/process/wait_status.hpp"

namespace hyrun {
namespace {

// Every node reads every node's record after the fence, so a node that failed before the
// exchange, or a different -n, is named on all of them and each ends by itself. Returns
// every task's host name.
std::vector<std::string> check_node_records(RootExchange& exchange, const LaunchOptions& options) {
  std::vector<std::string> differing, hosts;
  for (int task = 0; task < exchange.tasks(); ++task) {
    const NodeRecord record = exchange.node_record(task, options.bootstrap_timeout);
    const std::string host = record.host.empty() ? fmt::format("task {}", task) : record.host;
    hosts.push_back(host);
    if (record.error)
      throw Error(fmt::format("hyrun task {} on {} failed before the launch: {}", task, host, *record.error),
                  record.exit_code);
    if (record.ranks != options.ranks)
      differing.push_back(fmt::format("task {} on {} has -n {}", task, host, record.ranks));
  }
  if (!differing.empty())
    throw UsageError(fmt::format("every hyrun of a job must be started with the same -n, but this one has -n {} and {}",
                                 options.ranks, fmt::join(differing, ", ")));
  return hosts;
}

// The link to the root's hyrun (docs/architecture.md), at the root's address on a network
// this node shares; none when the root's record has no link port (an older root).
std::optional<NodeLink> connect_to_root(const RootRecord& record, int task, const std::string& root_host,
                                        std::chrono::milliseconds node_timeout) {
  if (!record.link_port || !record.master_addresses) return std::nullopt;
  std::vector<InterfaceAddress> root;
  for (const auto& a : *record.master_addresses) root.push_back(InterfaceAddress::parse(a));
  if (root.empty()) return std::nullopt;
  const MasterChoice choice = choose_master(root, local_ipv4_addresses());
  spdlog::debug("node link: connecting to the root's hyrun at {}:{}", choice.address, *record.link_port);
  return NodeLink::connect(choice.address, *record.link_port, task, root_host, record.job_token, node_timeout);
}

}  // namespace

int run_launch(const LaunchOptions& options, SignalEvents& signals, RootExchange& exchange) {
  const int task = exchange.task();
  const int tasks = exchange.tasks();
  const bool peers = exchange.has_peers();

  // Every way this node can end badly must reach the other nodes: they cannot see this
  // node's ranks, and without srun --kill-on-bad-exit they would wait for them until their
  // own bootstrap limit. Errors that every node found the same way (the root's error
  // record, a different -n) end each node by itself; anything else aborts the job.
  bool every_node_knows = false;
  // The link among the nodes' hyrun processes; declared before the supervisor that polls it.
  std::optional<NodeLink> link;
  const auto abort_job = [&exchange, &link](int code, const std::string& why) {
    if (link) link->say_bye();  // this node ends the job itself: its closing link is no loss
    exchange.abort(code, why);  // does not return
  };

  RankEnvironment contract;
  contract.world_size = tasks * options.ranks;
  contract.local_world_size = options.ranks;
  contract.node_rank = task;
  contract.num_nodes = tasks;
  contract.bootstrap_timeout_ms = static_cast<int>(options.bootstrap_timeout.count());
  contract.output_terminal = ::isatty(STDOUT_FILENO) == 1;
  std::optional<NodeLaunch> node;
  // A failure before the exchange is said in this node's record and the fence is still
  // reached: every node then names it and ends by itself, and no node (nor Slurm's step
  // daemons) is left in a collective that one participant never joined.
  std::optional<Error> node_failure;
  try {
    // Tasks of this job on the same node split what Slurm did not give each of them alone.
    node.emplace(options, contract, task * options.ranks, exchange.task_share());
    // The plan of many ranks takes a while and the loop is not running yet: a signal that
    // came meanwhile ends hyrun here, before anything is started or printed.
    if (const auto sig = signals.pending_stop())
      throw Error(fmt::format("received {} while computing the binding plan; nothing was started", signal_name(*sig)),
                  128 + *sig);
    if (node->report_and_check()) return exit_code::kSuccess;  // --dry-run: each node shows its own plan
  } catch (const Error& e) {
    if (options.dry_run) throw;  // nothing was exchanged: every node reports its own plan's problem
    job_event_line(e.what());
    node_failure = e;
  }

  RankSupervisor supervisor(supervisor_options(options), signals);
  supervisor.set_relauncher(
      [&node](int local_rank, int incarnation) { return node->rank(local_rank, false, incarnation); });
  std::optional<Error> root_failure;
  std::optional<std::string> loss;  // the line that named a lost node
  std::string token;
  try {
    NodeRecord node_record{options.ranks, exchange.host(), std::nullopt, exit_code::kLauncherError};
    if (node_failure) {
      node_record.error = node_failure->what();
      node_record.exit_code = node_failure->exit_code();
    }
    exchange.put_node(node_record);
    if (task == 0) {
      // The root starts global rank 0 first; whatever happens, it still puts a record and
      // joins the fence, so no other node waits for a fence that never completes.
      RootRecord record;
      record.ranks = options.ranks;
      record.world_size = contract.world_size;
      try {
        // said in both records; rank 0 is not started
        if (node_failure) throw Error(node_failure->what(), node_failure->exit_code());
        token = make_job_token();
        node->set_job_token(token);
        record.job_token = token;
        // MASTER_ADDR/MASTER_PORT for programs with their own bootstrap.
        try {
          exchange.offer_rendezvous(record, *node);
        } catch (const SystemError& e) {  // only programs with their own bootstrap need it
          spdlog::warn("MASTER_ADDR/MASTER_PORT are not set: {}", e.what());
          record.master_port.reset();
        }
        // The node link: a node whose hyrun is lost ends the job (docs/cli.md, Failures).
        if (peers) try {
            link.emplace(NodeLink::listen(options.node_timeout));
            record.link_port = link->port();
          } catch (const SystemError& e) {
            spdlog::warn("the link among the nodes' hyrun processes is not available: {}", e.what());
          }
        if (options.bootstrap == BootstrapMode::kUcx) {
          supervisor.start(node->rank(0, true));
          const auto address = supervisor.await_root_address();
          // Stopped meanwhile (a signal, a failure): with other nodes, they must hear it
          // from the record; alone, the loop below starts nothing and finish() ends the job.
          if (!address && peers) throw Error("the job was stopped before rank 0 published its address");
          if (address) {
            record.root_address = *address;
            node->set_root_address(*address);
          }
        }
      } catch (const Error& e) {
        record.error = e.what();
        record.exit_code = e.exit_code();
        root_failure = e;
      }
      exchange.put_root(record);
    }
    if (!exchange.fence(options.bootstrap_timeout, [&signals] { return signals.pending_stop().has_value(); })) {
      // A signal while other nodes are awaited: honour it now, and end the job so that no
      // node waits in the fence for this one.
      job_event("stopped by a signal while waiting for the other nodes in the PMIx fence; aborting the job");
      supervisor.handle_signals();
      const int code = supervisor.finish().exit_code;
      exchange.abort(code, "hyrun was stopped by a signal while waiting for the other nodes");
    }
    // Past the fence, every node reads the same records: what they say ends each node by itself.
    every_node_knows = true;
    if (node_failure) return node_failure->exit_code();  // said on this node before the fence
    if (root_failure) throw Error(root_failure->what(), root_failure->exit_code());
    const std::vector<std::string> hosts = check_node_records(exchange, options);
    every_node_knows = false;

    if (task != 0) {
      const RootRecord record = exchange.root_record(options.bootstrap_timeout);
      if (record.error) {
        every_node_knows = true;
        throw Error(fmt::format("the root node failed before the launch: {}", *record.error),
                    exit_code::kLauncherError);
      }
      token = record.job_token;
      node->set_job_token(token);
      link = connect_to_root(record, task, hosts.at(0), options.node_timeout);
      exchange.take_rendezvous(record, *node);
      if (record.root_address) node->set_root_address(*record.root_address);
    }
    if (link) {
      if (task == 0) link->expect(hosts, task, token);
      link->on_loss([&supervisor, &loss, &options, task, tasks](const NodeLink::Loss& lost) {
        const std::string what = fmt::format("lost the hyrun of node {} ({}{})", lost.host,
                                             lost.relayed ? "the root's hyrun lost it: " : "", lost.why);
        // A program that handles deaths goes on without the node, as without a killed rank:
        // its ranks are told of the node's ranks' deaths. Not without the root: rank 0
        // lives there, and the other nodes' link with it.
        if (lost.task > 0 && lost.task < tasks && lost.task != task && supervisor.every_rank_handles_deaths()) {
          const int first = lost.task * options.ranks;
          job_event_line(
              fmt::format("{}; its ranks {}-{} are reported dead to this node's ranks, which handle deaths: "
                          "the job goes on",
                          what, first, first + options.ranks - 1));
          supervisor.report_remote_deaths(first, options.ranks);
          return true;
        }
        loss = what;
        job_event_line(*loss);
        supervisor.stop(SIGTERM, exit_code::kLauncherError);
        return false;
      });
      supervisor.add_participant(*link);
    }
    const int first = (task == 0 && options.bootstrap == BootstrapMode::kUcx) ? 1 : 0;
    for (int local = first; local < options.ranks && !supervisor.stopping(); ++local) {
      supervisor.start(node->rank(local, false));
      if (link) link->service();  // starting many ranks takes a while: the other nodes still hear us
    }
  } catch (const Error& e) {
    // A TimeoutError here means some hyrun never reached the exchange (stuck or gone):
    // the whole job is aborted so that no node waits for it until its own limit.
    const bool missing_node = peers && dynamic_cast<const TimeoutError*>(&e) != nullptr;
    if (missing_node) job_event_line(e.what());
    supervisor.stop(SIGTERM, e.exit_code());  // stop and reap what did start before the error is reported
    supervisor.finish();
    if (!missing_node && (every_node_knows || !peers)) throw;
    // e.g. "cannot execute '/nonexistent'": said here, then the job ends everywhere
    if (!missing_node) job_event_line(e.what());
    abort_job(e.exit_code(), e.what());
  }
  if (!peers) return supervisor.finish().exit_code;  // the whole job is here: its end needs telling no one

  JobResult result;
  try {
    result = supervisor.finish();
  } catch (const Error& e) {  // e.g. a restarted rank that cannot be started
    job_event_line(e.what());
    abort_job(e.exit_code(), e.what());
  }
  const int code = result.exit_code;
  if (loss) abort_job(code, *loss);
  if (result.rank_failure) abort_job(code, *result.rank_failure);
  if (code != exit_code::kSuccess) {
    // A signal from the launch above us (slurmstepd for scancel or srun's own teardown,
    // mpirun's daemon) reaches every node: each ends by itself, and srun keeps naming the
    // first failure. A signal from anyone else reached this node only: the others' ranks
    // would wait for this node's, so the job ends everywhere.
    const auto signal = result.stop_signal;
    if (signal && is_ancestor(signals.sender_of(*signal))) {
      if (link) link->say_bye();
      return code;
    }
    abort_job(code, signal ? fmt::format("this node's ranks were stopped by {} from pid {}", signal_name(*signal),
                                         signals.sender_of(*signal))
                           : fmt::format("this node's ranks were stopped (exit status {})", code));
  }
  if (link) {
    // Nodes finish at different times: the root stays until every other node said bye, so
    // that a node lost after the root's ranks ended still ends the job.
    if (task == 0 && !link->await_byes(signals)) abort_job(exit_code::kLauncherError, *loss);
    link->say_bye();
    if (const auto sig = signals.pending_stop()) {  // came while the root waited for the others
      job_event("received {} while waiting for the other nodes' hyrun to finish", signal_name(*sig));
      return 128 + *sig;
    }
  }
  return code;
}

}  // namespace hyrun
