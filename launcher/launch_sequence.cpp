#include "hyrun/launcher/launch_sequence.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <exception>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hyrun/common/error.hpp"
#include "hyrun/common/job_layout.hpp"
#include "hyrun/common/job_token.hpp"
#include "hyrun/launcher/early_start.hpp"
#include "hyrun/launcher/launch_timings.hpp"
#include "hyrun/launcher/master_endpoint.hpp"
#include "hyrun/launcher/node_launch.hpp"
#include "hyrun/launcher/outer_fence.hpp"
#include "hyrun/launcher/pmi_service.hpp"
#include "hyrun/launcher/pmix_relay.hpp"
#include "hyrun/launcher/pmix_service.hpp"
#include "hyrun/launcher/rank_supervisor.hpp"
#include "hyrun/link/link_tree.hpp"
#include "hyrun/link/node_link.hpp"
#include "hyrun/process/job_events.hpp"
#include "hyrun/process/own_stderr.hpp"
#include "hyrun/process/process_ancestry.hpp"
#include "hyrun/process/wait_status.hpp"

namespace hyrun {
namespace {

// Every node reads every node's record after the fence, so a node that failed before the
// exchange, or a different -n or --tree-width, is named on all of them and each ends by
// itself. Returns every task's record, its host named; nullopt when `stop_requested` said so
// while they were read.
std::optional<std::vector<NodeRecord>> check_node_records(RootExchange& exchange, const LaunchOptions& options,
                                                          const std::function<bool()>& stop_requested) {
  std::vector<std::string> differing;
  auto read = exchange.node_records(options.bootstrap_timeout, stop_requested);
  if (!read) return std::nullopt;
  std::vector<NodeRecord>& records = *read;
  if (records.size() != static_cast<std::size_t>(exchange.tasks()))
    throw Error(fmt::format("hyrun read {} node records for {} tasks", records.size(), exchange.tasks()));
  for (int task = 0; task < exchange.tasks(); ++task) {
    NodeRecord& record = records.at(static_cast<std::size_t>(task));
    if (record.host.empty()) record.host = fmt::format("task {}", task);
    const std::string& host = record.host;
    if (record.error)
      throw Error(fmt::format("hyrun task {} on {} failed before the launch: {}", task, host, *record.error),
                  record.exit_code);
    if (record.ranks != options.ranks)
      differing.push_back(fmt::format("task {} on {} has -n {}", task, host, record.ranks));
    else if (record.tree_width != options.tree_width)
      differing.push_back(fmt::format("task {} on {} has --tree-width {}", task, host, record.tree_width));
  }
  if (!differing.empty())
    throw UsageError(
        fmt::format("every hyrun of a job must be started with the same -n and --tree-width, but this one has -n {} "
                    "--tree-width {} and {}",
                    options.ranks, options.tree_width, fmt::join(differing, ", ")));
  return read;
}

// This node's IPv4 addresses, for the nodes that connect to it.
std::vector<std::string> local_addresses() {
  std::vector<std::string> addresses;
  for (const auto& a : local_ipv4_addresses()) addresses.push_back(a.to_string());
  return addresses;
}

// Where a hyrun that offered `addresses` is reached from here: its address on a network
// this node shares. Nullopt when it offered none.
std::optional<std::string> reachable_address(const std::vector<std::string>& addresses) {
  std::vector<InterfaceAddress> candidates;
  for (const auto& a : addresses) candidates.push_back(InterfaceAddress::parse(a));
  if (candidates.empty()) return std::nullopt;
  return choose_master(candidates, local_ipv4_addresses()).address;
}

// Connects `link` to `task`'s hyrun (docs/architecture.md). False when it offered no address.
bool dial_node(NodeLink& link, int task, const std::string& host, const std::vector<std::string>& addresses, int port) {
  const auto address = reachable_address(addresses);
  if (!address) return false;
  spdlog::debug("node link: connecting to the hyrun of task {} at {}:{}", task, *address, port);
  link.dial(task, host, *address, port);
  return true;
}

// A node link with the options' limits: --node-timeout for a neighbour's silence, and
// --bootstrap-timeout for one still in its launch (reading every node's record: a node may be
// that far behind another).
NodeLink limited(NodeLink link, const LaunchOptions& options) {
  link.allow_launch(options.bootstrap_timeout);
  return link;
}

// Where a node listens, for a connection of this node's own (NodeLink::ask).
std::optional<NodeLink::Endpoint> endpoint_of(const NodeRecord& node) {
  if (!node.link_port) return std::nullopt;
  const auto address = reachable_address(node.link_addresses);
  if (!address) return std::nullopt;
  return NodeLink::Endpoint{*address, *node.link_port};
}

// What the plan of this node's ranks came to. A failure before the exchange is said in this
// node's record and the fence is still reached: every node then names it and ends by itself,
// and no node (nor Slurm's step daemons) is left in a collective that one participant never
// joined.
struct NodePlan {
  bool dry_run_shown = false;  // --dry-run: the plan was shown, nothing more to do
  std::optional<Error> failure;
};

// Where the launch stands after the exchange of records. Past the fence every node reads the
// same records, so what they say ends each node by itself (kEndedEverywhere); any other
// error of the launch is this node's alone and ends the job everywhere (Launch::end_early).
struct ExchangeOutcome {
  enum class Kind {
    kProceed,          // start the ranks
    kNodeFailed,       // this node failed before the exchange and said so: end with `exit_code`
    kEndedEverywhere,  // `error`, read in the records by every node
  };
  Kind kind = Kind::kProceed;
  int exit_code = 0;
  std::exception_ptr error;
  std::vector<std::string> hosts;  // every task's host name (kProceed)
  std::vector<NodeRecord> nodes;   // every task's record (kProceed)
  std::optional<RootRecord> root;  // the root's record, on the other nodes
};

// The stages of one launch, in order: plan_node, exchange, join_root (not on the root),
// connect_link, start_ranks, and finish (or end_early). They share the node's plan and the
// link among the nodes' hyrun processes, both declared before the supervisor that uses them.
class Launch {
 public:
  Launch(const LaunchOptions& options, SignalEvents& signals, RootExchange& exchange)
      : options_(options),
        signals_(signals),
        exchange_(exchange),
        task_(exchange.task()),
        tasks_(exchange.tasks()),
        // Every task with this one's -n, each on a node of its own (check_node_records
        // holds every node to the same -n after the exchange).
        layout_(JobLayout::uniform(tasks_, options.ranks)),
        peers_(exchange.has_peers()),
        tree_(options.tree_width, tasks_),
        timings_(options.timings, exchange.host(), exchange.task(), exchange.tasks()) {}

  NodePlan plan_node();
  // Restarted ranks are launched from this node's plan; PMIx events reach the supervisor.
  void restart_through(RankSupervisor& supervisor);
  ExchangeOutcome exchange(RankSupervisor& supervisor, const NodePlan& plan);
  // Another node takes the token, the link and the rendezvous from the root's record.
  void join_root(const RootRecord& record, const ExchangeOutcome& outcome);
  void connect_link(RankSupervisor& supervisor, const ExchangeOutcome& outcome);
  void start_ranks(RankSupervisor& supervisor);
  int finish(RankSupervisor& supervisor);
  // Stops and reaps what started, then rethrows `error` when every node learned it by itself
  // (or there is no other node), else says it and aborts the job.
  [[noreturn]] void end_early(RankSupervisor& supervisor, const std::exception_ptr& error, bool known_everywhere);

 private:
  // This node's ranks (its -n).
  int local_ranks() const { return layout_.task(task_).ranks; }
  // This node's local ranks from `first` on.
  std::vector<int> local_ranks_from(int first) const {
    std::vector<int> ranks;
    for (int local = first; local < local_ranks(); ++local) ranks.push_back(local);
    return ranks;
  }
  std::optional<Error> offer_root(RankSupervisor& supervisor, const std::optional<Error>& node_failure);
  void start_early(RankSupervisor& supervisor, int first);
  void complete_early();
  void serve_pmix();
  void relay_pmix(const std::vector<std::string>& hosts);
  bool on_loss(RankSupervisor& supervisor, const NodeLink::Loss& lost);
  int end_with(const JobResult& result);
  // What the launch cost this node so far (--timings).
  LinkCosts costs() const;
  // A signal while the exchange waits on the other nodes: honour it now, and end the job so
  // that no node waits for this one (in the fence, or for its link).
  [[noreturn]] void stopped_in_exchange(RankSupervisor& supervisor, const std::string& while_what) {
    job_event("stopped by a signal while {}; aborting the job", while_what);
    supervisor.handle_signals();
    const int code = supervisor.finish().exit_code;
    abort_job(code, "hyrun was stopped by a signal while waiting for the other nodes");
  }
  // This node ends the job itself: its closing link is no loss.
  [[noreturn]] void abort_job(int code, const std::string& why) {
    if (link_) link_->say_bye();
    if (pmix_) pmix_->remove_files();  // the abort ends this process without destructors
    if (early_) early_->remove();
    // The abort ends this process without destructors: hyrun's own last lines go now, within
    // the drain limit a stopping job gives its output (a stalled reader cannot hold the abort).
    own_stderr()->flush(std::chrono::seconds(2));
    exchange_.abort(code, why);
    std::terminate();  // not reached: RootExchange::abort does not return (GCC cannot see it through the virtual)
  }

  const LaunchOptions& options_;
  SignalEvents& signals_;
  RootExchange& exchange_;
  const int task_;
  const int tasks_;
  const JobLayout layout_;
  const bool peers_;
  LinkTree tree_;  // who watches whom on the node link: from the options, then from the records
  RankEnvironment contract_;
  LaunchTimings timings_;
  std::unique_ptr<PmixService> pmix_;  // outlives node_, which hands its variables to the ranks
  std::unique_ptr<PmiService> pmi_;    // the same, for MPICH's PMI-1
  std::optional<NodeLaunch> node_;
  std::optional<NodeLink> link_;
  // After pmix_ and link_: its open requests fail before the server goes, and it uses the link.
  std::optional<PmixRelay> relay_;
  std::optional<OuterFence> outer_fence_;  // the relay's fences, through the outer launcher (--fences outer)
  std::string token_;
  std::optional<std::string> loss_;      // the line that named a lost node
  std::map<int, LinkCosts> node_costs_;  // root: what each node said its launch cost (--timings)
  // The ranks other than the root's rank 0, started before the exchange (start_early) or
  // after it (start_ranks).
  std::optional<EarlyStart> early_;
  std::optional<Error> early_failure_;  // their start failed: said after the exchange
};

NodePlan Launch::plan_node() {
  const JobLayout::Task& mine = layout_.task(task_);
  contract_ = launch_contract(options_, LaunchPlace{.world_size = layout_.world_size(),
                                                    .local_world_size = mine.ranks,
                                                    .node_rank = mine.node,
                                                    .num_nodes = layout_.nodes()});
  NodePlan plan;
  try {
    // Tasks of this job on the same node split what Slurm did not give each of them alone.
    node_.emplace(options_, contract_, mine.first_rank, exchange_.task_share());
    // The plan of many ranks takes a while and the loop is not running yet: a signal that
    // came meanwhile ends hyrun here, before anything is started or printed.
    if (const auto sig = signals_.pending_stop())
      throw Error(fmt::format("received {} while computing the binding plan; nothing was started", signal_name(*sig)),
                  128 + *sig);
    plan.dry_run_shown = node_->report_and_check();  // --dry-run: each node shows its own plan
    timings_.mark("plan");
    if (!plan.dry_run_shown) serve_pmix();
  } catch (const Error& e) {
    if (options_.dry_run) throw;  // nothing was exchanged: every node reports its own plan's problem
    job_event_line(e.what());
    plan.failure = e;
  }
  return plan;
}

void Launch::restart_through(RankSupervisor& supervisor) {
  supervisor.set_relauncher(
      [this](int local_rank, int incarnation) { return node_->rank(local_rank, false, incarnation); });
  if (pmix_) pmix_->attach(supervisor);
  if (pmi_) pmi_->attach(supervisor);
}

// hyrun serves PMIx to its ranks (docs/pmix.md): the whole job is one namespace. Without
// the server a program that needs none still runs: its failure to start is said, not the job's.
void Launch::serve_pmix() {
  const auto job = exchange_.served_job();
  if (!job) return;
  pmi_ = std::make_unique<PmiService>(layout_, task_, job->nspace);
  node_->add_service(*pmi_);
  try {
    pmix_ = PmixService::start(*job, layout_, task_, node_->plan());
    node_->add_service(*pmix_);
    timings_.mark("pmix server");
  } catch (const Error& e) {
    spdlog::warn("hyrun's PMIx server is not available, so MPI programs would run as singletons: {}", e.what());
  }
}

// The root starts global rank 0 first; whatever happens, it still puts a record and joins
// the fence, so no other node waits for a fence that never completes. Returns its failure.
std::optional<Error> Launch::offer_root(RankSupervisor& supervisor, const std::optional<Error>& node_failure) {
  RootRecord record;
  record.ranks = options_.ranks;
  record.world_size = contract_.world_size;
  std::optional<Error> failure;
  try {
    if (node_failure) throw Error(node_failure->what(), node_failure->exit_code());  // said in both records
    token_ = make_job_token();
    node_->set_job_token(token_);
    record.job_token = token_;
    // MASTER_ADDR/MASTER_PORT for programs with their own bootstrap.
    try {
      exchange_.offer_rendezvous(record, *node_);
    } catch (const SystemError& e) {  // only programs with their own bootstrap need it
      spdlog::warn("MASTER_ADDR/MASTER_PORT are not set: {}", e.what());
      record.master_port.reset();
    }
    // The node link: a node whose hyrun is lost ends the job (docs/cli.md, Failures).
    if (peers_) try {
        link_.emplace(limited(NodeLink::listen(options_.node_timeout), options_));
        record.link_port = link_->port();
      } catch (const SystemError& e) {
        spdlog::warn("the link among the nodes' hyrun processes is not available: {}", e.what());
      }
    if (options_.bootstrap == BootstrapMode::kUcx) {
      supervisor.start(node_->rank(0, true));
      timings_.mark("rank 0 started");
      // The others start once rank 0 says it uses the worker library: a program that does
      // not fails as rank 0's alone, as before.
      const auto address = supervisor.await_root_address([&] { start_early(supervisor, 1); });
      timings_.mark("rank 0 address");
      // An MPI (PMIx or PMI) program needs no address: its MPI_Init waits for the others,
      // so they start now, not after the exchange (docs/pmix.md). Not again where rank 0's
      // worker-library hello started them already.
      if (!address && supervisor.root_is_pmix_client() && !early_) {
        early_.emplace(*node_, local_ranks_from(1));
        early_->finish(supervisor);  // the node link is not linked yet: nothing to hear meanwhile
        timings_.mark("ranks started");
      }
      // Stopped meanwhile (a signal, a failure): with other nodes, they must hear it from
      // the record; alone, no rank starts and finish() ends the job.
      if (!address && peers_ && !supervisor.root_is_pmix_client())
        throw Error("the job was stopped before rank 0 published its address");
      if (address) {
        record.root_address = *address;
        node_->set_root_address(*address);
      }
      complete_early();
    }
  } catch (const Error& e) {
    record.error = e.what();
    record.exit_code = e.exit_code();
    failure = e;
  }
  exchange_.put_root(record);
  timings_.mark("root record put");
  return failure;
}

ExchangeOutcome Launch::exchange(RankSupervisor& supervisor, const NodePlan& plan) {
  // The other nodes' ranks start now and set up meanwhile; a failure to start them is this
  // node's alone, said after the exchange as it would have been at their start.
  if (task_ != 0 && !plan.failure && options_.bootstrap == BootstrapMode::kUcx) try {
      start_early(supervisor, 0);
    } catch (const Error& e) {
      early_failure_ = e;
    }
  NodeRecord node_record;
  node_record.ranks = options_.ranks;
  node_record.host = exchange_.host();
  node_record.tree_width = options_.tree_width;
  // Every node listens (the root does in offer_root): for its children in the link's tree,
  // and for the nodes that ask for its ranks' data straight (direct modex).
  if (peers_ && task_ != 0 && !plan.failure) try {
      link_.emplace(limited(NodeLink::listen(options_.node_timeout), options_));
      node_record.link_port = link_->port();
      node_record.link_addresses = local_addresses();
    } catch (const SystemError& e) {
      spdlog::warn(
          "the node link: this node does not listen, so its parent watches its children and its ranks' "
          "data goes to other nodes through the root: {}",
          e.what());
      link_.reset();
    }
  if (plan.failure) {
    node_record.error = plan.failure->what();
    node_record.exit_code = plan.failure->exit_code();
  }
  exchange_.put_node(node_record);
  std::optional<Error> root_failure;
  if (task_ == 0) root_failure = offer_root(supervisor, plan.failure);
  const auto stop_requested = [this] { return signals_.pending_stop().has_value(); };
  if (!exchange_.fence(options_.bootstrap_timeout, stop_requested))
    stopped_in_exchange(supervisor, "waiting for the other nodes in the PMIx fence");
  timings_.mark("fence");
  ExchangeOutcome outcome;
  if (plan.failure) {  // said on this node before the fence
    outcome.kind = ExchangeOutcome::Kind::kNodeFailed;
    outcome.exit_code = plan.failure->exit_code();
    return outcome;
  }
  try {
    if (root_failure) throw Error(root_failure->what(), root_failure->exit_code());
    auto nodes = check_node_records(exchange_, options_, stop_requested);
    if (!nodes) stopped_in_exchange(supervisor, "reading the nodes' records");
    outcome.nodes = std::move(*nodes);
    std::vector<bool> can_parent;
    for (const auto& node : outcome.nodes) {
      outcome.hosts.push_back(node.host);
      can_parent.push_back(can_parent.empty() || (node.link_port && !node.link_addresses.empty()));
    }
    tree_ = LinkTree(options_.tree_width, tasks_, std::move(can_parent));
  } catch (const TimeoutError&) {
    throw;  // a node's record never came: that node is not known to have failed
  } catch (const Error&) {
    outcome.kind = ExchangeOutcome::Kind::kEndedEverywhere;
    outcome.error = std::current_exception();
    return outcome;
  }
  if (task_ != 0) {
    outcome.root = exchange_.root_record(options_.bootstrap_timeout, stop_requested);
    if (!outcome.root) stopped_in_exchange(supervisor, "reading the root's record");
    timings_.mark("root record");
    if (outcome.root->error) {
      outcome.kind = ExchangeOutcome::Kind::kEndedEverywhere;
      outcome.error = std::make_exception_ptr(Error(
          fmt::format("the root node failed before the launch: {}", *outcome.root->error), exit_code::kLauncherError));
    }
  }
  return outcome;
}

void Launch::join_root(const RootRecord& record, const ExchangeOutcome& outcome) {
  token_ = record.job_token;
  node_->set_job_token(token_);
  // The parent's connection in the link's tree; the root's only on need where the parent is
  // another node (NodeLink::reach_root), so that the root links with its children and the
  // nodes that need it, not with every node. None when the root's record has no link port.
  if (record.link_port && record.master_addresses && !record.master_addresses->empty()) {
    if (link_)
      link_->expect(outcome.hosts, task_, token_, tree_);  // this node's children connect to it
    else
      link_.emplace(limited(NodeLink::unlistened(task_, token_, tree_, options_.node_timeout), options_));
    if (const int parent = tree_.parent(task_); parent > 0) {
      const NodeRecord& node = outcome.nodes.at(static_cast<std::size_t>(parent));
      dial_node(*link_, parent, node.host, node.link_addresses, node.link_port.value_or(0));
      if (const auto root = reachable_address(*record.master_addresses))
        link_->reach_root(outcome.hosts.at(0), *root, *record.link_port);
    } else {
      dial_node(*link_, 0, outcome.hosts.at(0), *record.master_addresses, *record.link_port);
    }
    timings_.mark("link");
  } else {
    link_.reset();
  }
  exchange_.take_rendezvous(record, *node_);
  if (record.root_address) node_->set_root_address(*record.root_address);
}

bool Launch::on_loss(RankSupervisor& supervisor, const NodeLink::Loss& lost) {
  // Named by task and host: several tasks may share a host (or, simulated, every node).
  const std::string what = fmt::format(
      "lost the hyrun of {}node {} ({}{})", lost.task >= 0 ? fmt::format("task {} on ", lost.task) : "", lost.host,
      !lost.relayed        ? ""
      : lost.reporter == 0 ? "the root's hyrun lost it: "
                           : fmt::format("the hyrun of task {} lost it: ", lost.reporter),
      lost.why);
  // A program that handles deaths goes on without the node, as without a killed rank: its
  // ranks are told of the node's ranks' deaths. Not without the root: rank 0 lives there,
  // and the other nodes' link with it.
  if (lost.task > 0 && lost.task < tasks_ && lost.task != task_ && supervisor.every_rank_handles_deaths()) {
    const JobLayout::Task& gone = layout_.task(lost.task);
    job_event_line(
        fmt::format("{}; its ranks {}-{} are reported dead to this node's ranks, which handle deaths: the job goes on",
                    what, gone.first_rank, gone.first_rank + gone.ranks - 1));
    supervisor.report_remote_deaths(gone.first_rank, gone.ranks);
    if (relay_) relay_->gone(lost.task);  // what its ranks' data was asked of it fails
    return true;
  }
  loss_ = what;
  if (const auto waiting = relay_ ? relay_->waiting() : std::nullopt) loss_ = fmt::format("{}; {}", what, *waiting);
  job_event_line(*loss_);
  supervisor.stop(SIGTERM, exit_code::kLauncherError);
  return false;
}

// The ranks' PMIx fences and data, and their PMI-1 barriers, across nodes go over the node
// link (pmix_relay.hpp); without the link they fail.
void Launch::relay_pmix(const std::vector<std::string>& hosts) {
  if ((!pmix_ && !pmi_) || tasks_ < 2) return;
  PmixRelay::Send send;
  PmixRelay::Broadcast broadcast;
  if (link_) {
    send = [this](int task, const std::string& body) { return link_->send_to(task, body); };
    broadcast = [this](std::string body) { link_->broadcast(std::move(body)); };
  }
  relay_.emplace(task_, layout_, hosts, std::move(send), std::move(broadcast),
                 [this](std::uint32_t rank, std::uint64_t id) {
                   if (pmix_) pmix_->serve_local_data(rank, id);
                 });
  if (link_) {
    for (const LinkKind kind : PmixRelay::kKinds)
      link_->on(kind, [this](int task, std::string_view body) { return relay_->handle(task, body); });
    // Direct modex straight between nodes (pmix_relay.hpp); the root asks so only a node not
    // linked with it, whose answer comes on that node's connection to the root.
    relay_->direct_through([this](int task, const std::string& body) { return link_->ask(task, body); },
                           [this](int task, const std::string& body) { return link_->reply(task, body); });
    link_->on_unreachable([this](int task) { relay_->unreachable(task); });
    if (task_ == 0) link_->on_bye([this](int task) { relay_->gone(task); });
  }
  const bool through_outer =
      options_.fences == FenceRoute::kOuter || (options_.fences == FenceRoute::kAuto && tasks_ > kLinkFencesUpTo);
  if (pmix::ClientProcess* outer = exchange_.outer_client(); outer && through_outer) {
    outer_fence_.emplace(
        *outer, kMaxRelayedBytes + hosts.size(),  // with each part's mark (pmix_relay.hpp)
        [this](std::uint64_t number, std::optional<std::vector<std::string>> parts, std::size_t bytes) {
          relay_->gathered(number, std::move(parts), bytes);
        },
        [this](std::uint64_t number, const std::string& why) { relay_->gather_failed(number, why); });
    relay_->gather_through(
        [this](std::uint64_t number, std::string part) { outer_fence_->start(number, std::move(part)); });
  }
  if (pmix_) pmix_->relay_to(*relay_);
  if (pmi_) pmi_->relay_to(*relay_);
}

void Launch::connect_link(RankSupervisor& supervisor, const ExchangeOutcome& outcome) {
  relay_pmix(outcome.hosts);
  if (outer_fence_) supervisor.add_participant(*outer_fence_);
  if (!link_) return;
  if (task_ == 0) link_->expect(outcome.hosts, task_, token_, tree_);
  // Where each node listens, for the direct modex connections this node opens (NodeLink::ask).
  link_->locate_with(
      [nodes = outcome.nodes](int task) { return endpoint_of(nodes.at(static_cast<std::size_t>(task))); });
  link_->on_loss([this, &supervisor](const NodeLink::Loss& lost) { return on_loss(supervisor, lost); });
  // Whatever the root's --timings, a node's costs line is never a protocol violation; it
  // comes up the tree (the other nodes pass it on), from the sender's own subtree.
  if (task_ == 0)
    link_->on(LinkKind::kCosts, [this](int task, std::string_view body) {
      const auto costs = parse_link<LinkCosts>(body);
      if (!costs || !tree_.within(costs->task, task)) return false;
      node_costs_[costs->task] = *costs;
      return true;
    });
  supervisor.add_participant(*link_);
}

// With the worker library's bootstrap the ranks need rank 0's address (and on the other
// nodes the job's token) only when their World starts: they are started at once, with
// HYRUN_ROOT_PENDING, and load and set up UCX while the address is published and exchanged;
// complete_early gives them the rest (docs/architecture.md). Without a place for it (a full
// $TMPDIR) they start as before, after the exchange.
void Launch::start_early(RankSupervisor& supervisor, int first) {
  early_.emplace(*node_, local_ranks_from(first));
  if (early_->start(supervisor)) timings_.mark("ranks started");
}

void Launch::complete_early() {
  if (early_ && early_->complete()) timings_.mark("ranks given the root");
}

void Launch::start_ranks(RankSupervisor& supervisor) {
  if (early_failure_) throw Error(early_failure_->what(), early_failure_->exit_code());
  if (early_ && early_->started()) return complete_early();
  if (!early_)
    early_.emplace(*node_, local_ranks_from((task_ == 0 && options_.bootstrap == BootstrapMode::kUcx) ? 1 : 0));
  // Starting many ranks takes a while: the other nodes still hear this one.
  early_->finish(supervisor, [this] {
    if (link_) link_->service();
  });
  timings_.mark("ranks started");
}

void Launch::end_early(RankSupervisor& supervisor, const std::exception_ptr& error, bool known_everywhere) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    // A TimeoutError here means some hyrun never reached the exchange (stuck or gone): the
    // whole job is aborted so that no node waits for it until its own limit.
    const bool missing_node = peers_ && dynamic_cast<const TimeoutError*>(&e) != nullptr;
    if (missing_node) job_event_line(e.what());
    supervisor.stop(SIGTERM, e.exit_code());  // stop and reap what did start before the error is reported
    supervisor.finish();
    timings_.mark("job end");
    timings_.print();
    if (!missing_node && (known_everywhere || !peers_)) throw;
    // e.g. "cannot execute '/nonexistent'": said here, then the job ends everywhere
    if (!missing_node) job_event_line(e.what());
    abort_job(e.exit_code(), e.what());
  }
}

int Launch::finish(RankSupervisor& supervisor) {
  JobResult result;
  try {
    result = supervisor.finish();
  } catch (const Error& e) {  // e.g. a restarted rank that cannot be started
    if (!peers_) throw;
    job_event_line(e.what());
    abort_job(e.exit_code(), e.what());
  }
  timings_.mark("job end");
  if (peers_) timings_.set_costs(costs());
  timings_.print();
  if (!peers_) return result.exit_code;  // the whole job is here: its end needs telling no one
  return end_with(result);
}

LinkCosts Launch::costs() const {
  LinkCosts costs;
  costs.task = task_;
  costs.cpu_us = own_cpu_us();
  if (const pmix::ClientProcess* outer = exchange_.outer_client())
    costs.helper_cpu_us = process_cpu_us(outer->pid()).value_or(0);
  if (link_) {
    costs.link_sent = link_->bytes_sent();
    costs.link_received = link_->bytes_received();
  }
  if (relay_) {
    costs.fences = relay_->fences();
    costs.fence_bytes = relay_->part_bytes();
  }
  return costs;
}

// How this node's end reaches the others.
int Launch::end_with(const JobResult& result) {
  const int code = result.exit_code;
  if (loss_) abort_job(code, *loss_);
  if (result.rank_failure) abort_job(code, *result.rank_failure);
  if (code != exit_code::kSuccess) {
    // A signal from the launch above us (slurmstepd for scancel or srun's own teardown,
    // mpirun's daemon) reaches every node: each ends by itself, and srun keeps naming the
    // first failure. A signal from anyone else reached this node only: the others' ranks
    // would wait for this node's, so the job ends everywhere.
    const auto signal = result.stop_signal;
    if (signal && is_ancestor(signals_.sender_of(*signal))) {
      if (link_) link_->say_bye();
      return code;
    }
    abort_job(code, signal ? fmt::format("this node's ranks were stopped by {} from pid {}", signal_name(*signal),
                                         signals_.sender_of(*signal))
                           : fmt::format("this node's ranks were stopped (exit status {})", code));
  }
  if (link_) {
    // Nodes finish at different times: each stays until the nodes below it in the tree said
    // bye (the root: every other node), so that a node lost after this one's ranks ended
    // still ends the job, and its costs and byes reach the root through this one.
    if (!link_->await_byes(signals_)) abort_job(exit_code::kLauncherError, *loss_);
    if (task_ != 0 && timings_.enabled()) link_->send_up(format_link(costs()));
    if (task_ == 0 && timings_.enabled()) {
      node_costs_[0] = costs();
      job_event_line(LaunchTimings::summary(node_costs_, tasks_));
    }
    link_->say_bye();
    if (const auto sig = signals_.pending_stop()) {  // came while the root waited for the others
      job_event("received {} while waiting for the other nodes' hyrun to finish", signal_name(*sig));
      return 128 + *sig;
    }
  }
  return code;
}

}  // namespace

// Every way this node can end badly must reach the other nodes: they cannot see this node's
// ranks, and without srun --kill-on-bad-exit they would wait for them until their own
// bootstrap limit. Errors that every node found the same way (the root's error record, a
// different -n) end each node by itself; anything else aborts the job.
int run_launch(const LaunchOptions& options, SignalEvents& signals, RootExchange& exchange) {
  Launch launch(options, signals, exchange);
  const NodePlan plan = launch.plan_node();
  if (plan.dry_run_shown) return exit_code::kSuccess;
  RankSupervisor supervisor(supervisor_options(options), signals);
  launch.restart_through(supervisor);
  ExchangeOutcome outcome;
  try {
    outcome = launch.exchange(supervisor, plan);
  } catch (const Error&) {
    launch.end_early(supervisor, std::current_exception(), false);
  }
  if (outcome.kind == ExchangeOutcome::Kind::kNodeFailed) return outcome.exit_code;
  if (outcome.kind == ExchangeOutcome::Kind::kEndedEverywhere) launch.end_early(supervisor, outcome.error, true);
  try {
    if (outcome.root) launch.join_root(*outcome.root, outcome);
    launch.connect_link(supervisor, outcome);
    launch.start_ranks(supervisor);
  } catch (const Error&) {
    launch.end_early(supervisor, std::current_exception(), false);
  }
  return launch.finish(supervisor);
}

}  // namespace hyrun
