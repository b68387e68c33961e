#include "hyrun/launcher/hybrid_mode.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "hyrun/common/error.hpp"
#include "hyrun/launcher/launch_sequence.hpp"
#include "hyrun/launcher/master_endpoint.hpp"
#include "hyrun/launcher/node_launch.hpp"
#include "hyrun/launcher/root_exchange.hpp"
#include "hyrun/process/adopted_orphans.hpp"
#include "hyrun/process/job_events.hpp"
#include "hyrun/process/wait_status.hpp"

namespace hyrun {
namespace {

// Keys under which hyrun processes exchange their records (protocol version in the name).
constexpr const char* kRootKey = "hyrun.root.v1";  // root only: token, address or error
constexpr const char* kNodeKey = "hyrun.node.v1";  // every node: its own arguments
constexpr int kProtocol = 2;                       // 2: node records with the link tree (link_tree.hpp)

std::vector<std::byte> to_bytes(const nlohmann::json& j) {
  const std::string text = j.dump();
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  return {p, p + text.size()};
}

nlohmann::json from_bytes(const std::vector<std::byte>& bytes, const std::string& what) {
  try {
    return nlohmann::json::parse(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{} is not a hyrun record: {}", what, e.what()));
  }
}

// The tasks of this srun step as Slurm says; 0 when it does not say, or not as a number
// (then nothing is concluded from it).
int slurm_step_tasks() {
  for (const char* name : {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"})
    if (const char* text = std::getenv(name)) {
      const std::string_view v(text);
      int tasks = 0;
      const auto [end, error] = std::from_chars(v.data(), v.data() + v.size(), tasks);
      return error == std::errc() && end == v.data() + v.size() ? tasks : 0;
    }
  return 0;
}

// The records as JSON objects under PMIx keys (docs/architecture.md, The PMIx exchange).
class PmixExchange final : public RootExchange {
 public:
  explicit PmixExchange(pmix::ClientProcess& pmix) : pmix_(pmix) {}

  int task() const override { return pmix_.rank(); }
  int tasks() const override { return pmix_.job_size(); }
  binding::NodeTaskShare task_share() const override {
    return binding::NodeTaskShare{pmix_.local_rank_on_node(), pmix_.local_size_on_node()};
  }
  std::string host() const override { return pmix_.hostname(); }
  bool has_peers() const override { return true; }

  // Named after the outer namespace: the same on every node, unique per srun step or
  // mpirun job. A task whose host the server did not name, or whose host another task has
  // too (two tasks on one node), gets a name of its own: libpmix's node map needs distinct ones.
  std::optional<ServedJob> served_job() const override {
    ServedJob job{"hyrun." + pmix_.nspace(), {}};
    std::set<std::string> seen;
    for (int task = 0; task < pmix_.job_size(); ++task) {
      std::string host = task < static_cast<int>(pmix_.task_hosts().size()) ? pmix_.task_hosts()[task] : "";
      if (host.empty()) host = fmt::format("hyrun-task-{}", task);
      if (!seen.insert(host).second) host = fmt::format("{}-task-{}", host, task);
      seen.insert(host);
      job.hosts.push_back(host);
    }
    return job;
  }

  // A port free here and every address of this node; each node picks the one on a
  // network it shares.
  void offer_rendezvous(RootRecord& record, NodeLaunch& node) override {
    std::vector<std::string> addresses;
    for (const auto& a : local_ipv4_addresses()) addresses.push_back(a.to_string());
    record.master_addresses = addresses;
    record.master_port = pick_free_tcp_port();
    take_rendezvous(record, node);
  }

  // The root's addresses and port from its record; an old record without them sets nothing.
  void take_rendezvous(const RootRecord& record, NodeLaunch& node) override {
    if (!record.master_port || !record.master_addresses) return;
    std::vector<InterfaceAddress> root;
    for (const auto& a : *record.master_addresses) root.push_back(InterfaceAddress::parse(a));
    if (root.empty()) {
      spdlog::warn("the root node has no IPv4 address other than loopback: MASTER_ADDR is not set");
      return;
    }
    const MasterChoice choice = choose_master(root, local_ipv4_addresses());
    spdlog::debug("MASTER_ADDR {} (interface '{}'), MASTER_PORT {}", choice.address, choice.interface,
                  *record.master_port);
    node.set_rendezvous(choice.address, *record.master_port, pmix_.nspace(), choice.interface);
  }

  void put_node(const NodeRecord& record) override {
    nlohmann::json j{{"ranks", record.ranks}, {"host", record.host}, {"tree_width", record.tree_width}};
    if (record.link_port) {
      j["link_port"] = *record.link_port;
      j["link_addresses"] = record.link_addresses;
    }
    if (record.error) {
      j["error"] = *record.error;
      j["exit_code"] = record.exit_code;
    }
    pmix_.put(kNodeKey, to_bytes(j));
  }

  void put_root(const RootRecord& record) override {
    nlohmann::json j{{"protocol", kProtocol}, {"ranks", record.ranks}, {"world_size", record.world_size}};
    if (record.error) {
      j["error"] = *record.error;
      j["exit_code"] = record.exit_code;
    } else {
      j["job_token"] = record.job_token;
      if (record.master_addresses) j["master_addresses"] = *record.master_addresses;
      if (record.master_port) j["master_port"] = *record.master_port;
      if (record.link_port) j["link_port"] = *record.link_port;
      if (record.root_address) j["root_address"] = *record.root_address;
    }
    pmix_.put(kRootKey, to_bytes(j));
  }

  bool fence(std::chrono::milliseconds limit, const std::function<bool()>& stop_requested) override {
    pmix_.commit();
    return pmix_.fence(limit, stop_requested);
  }

  std::optional<std::vector<NodeRecord>> node_records(std::chrono::milliseconds limit,
                                                      const std::function<bool()>& stop_requested) override {
    std::optional<std::vector<std::vector<std::byte>>> values;
    try {
      values = pmix_.get_many({{.key = kNodeKey, .first_rank = 0, .ranks = tasks()}}, limit, stop_requested);
    } catch (const TimeoutError& e) {  // after the fence: that task joined it without putting a record
      throw TimeoutError(fmt::format(
          "{} (every hyrun of the job puts its record before the fence: is that task running hyrun, of this version?)",
          e.what()));
    }
    if (!values) return std::nullopt;
    std::vector<NodeRecord> records;
    for (const auto& bytes : *values) records.push_back(node_record(static_cast<int>(records.size()), bytes));
    return records;
  }

  std::optional<RootRecord> root_record(std::chrono::milliseconds limit,
                                        const std::function<bool()>& stop_requested) override {
    const auto values = pmix_.get_many({{.key = kRootKey, .first_rank = 0, .ranks = 1}}, limit, stop_requested);
    if (!values) return std::nullopt;
    const auto j = from_bytes(values->at(0), "the root's record");
    if (j.value("protocol", 0) != kProtocol)
      throw Error(fmt::format("the root hyrun speaks protocol {}, this one {}: use the same hyrun on every node",
                              j.value("protocol", 0), kProtocol));
    try {
      RootRecord record;
      if (j.contains("error")) {
        record.error = j.at("error").get<std::string>();
        record.exit_code = j.value("exit_code", static_cast<int>(exit_code::kLauncherError));
        return record;
      }
      record.ranks = j.value("ranks", 0);
      record.world_size = j.value("world_size", 0);
      record.job_token = j.at("job_token").get<std::string>();
      // An older root may lack these, or give them another shape: then they are not used.
      if (j.contains("master_addresses") && j["master_addresses"].is_array()) {
        record.master_addresses.emplace();
        for (const auto& a : j["master_addresses"])
          if (a.is_string()) record.master_addresses->push_back(a.get<std::string>());
      }
      if (j.contains("master_port") && j["master_port"].is_number_integer())
        record.master_port = j["master_port"].get<int>();
      if (j.contains("link_port") && j["link_port"].is_number_integer()) record.link_port = j["link_port"].get<int>();
      if (j.contains("root_address")) record.root_address = j.at("root_address").get<std::string>();
      return record;
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("the root's record is not a hyrun record: {}", e.what()));
    }
  }

  [[noreturn]] void abort(int code, const std::string& why) override {
    pmix_.abort(code, fmt::format("{}: {}", pmix_.hostname(), why));
  }

  pmix::ClientProcess* outer_client() override { return &pmix_; }

 private:
  // What task `task` put under kNodeKey.
  static NodeRecord node_record(int task, const std::vector<std::byte>& bytes) {
    const std::string what = fmt::format("the record of hyrun task {}", task);
    const auto j = from_bytes(bytes, what);
    try {
      NodeRecord record;
      record.host = j.value("host", std::string());
      if (j.contains("error")) {
        record.error = j.at("error").get<std::string>();
        record.exit_code = j.value("exit_code", static_cast<int>(exit_code::kLauncherError));
        return record;
      }
      record.ranks = j.at("ranks").get<int>();
      record.tree_width = j.value("tree_width", 0);
      if (j.contains("link_port")) {
        record.link_port = j.at("link_port").get<int>();
        record.link_addresses = j.at("link_addresses").get<std::vector<std::string>>();
      }
      return record;
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("{} is not a hyrun record: {}", what, e.what()));
    }
  }

  pmix::ClientProcess& pmix_;
};

// ", PMIX_SERVER_URI41" and the like: the server addresses the environment gives, by name.
std::string server_uri_names() {
  std::string names;
  for (char** e = environ; *e != nullptr; ++e)
    if (const std::string_view entry(*e); entry.starts_with("PMIX_SERVER_URI"))
      names += fmt::format(", {}", entry.substr(0, entry.find('=')));
  return names;
}

}  // namespace

std::optional<pmix::ClientProcess> connect_pmix_for(const LaunchOptions& options, const SignalEvents& signals) {
  if (options.mode == LaunchMode::kLocal) return std::nullopt;
  // A PMIx server gives its clients PMIX_NAMESPACE; without it PMIx_Init can only fail,
  // after ~40 ms of looking for a system server, which local launches need not pay.
  const char* announced = std::getenv("PMIX_NAMESPACE");
  std::optional<pmix::ClientProcess> client;
  try {
    if (announced != nullptr || options.mode == LaunchMode::kPmix)
      client = pmix::ClientProcess::connect(options.bootstrap_timeout,
                                            [&signals] { return signals.pending_stop().has_value(); });
  } catch (const pmix::ClientProcess::Stopped&) {
    const int sig = signals.pending_stop().value_or(SIGTERM);
    throw Error(
        fmt::format("received {} while hyrun connected to the PMIx server; nothing was started", signal_name(sig)),
        128 + sig);
  } catch (const Error& e) {
    if (announced == nullptr) throw;
    // The environment names a server that does not take hyrun: most often one left from an
    // ended job or step (a shell inside an allocation, a script that saved its environment).
    throw Error(fmt::format("{}{}: hyrun's environment names a PMIx server (PMIX_NAMESPACE={}{}) that did not take it "
                            "as a client; if those PMIX_* variables are left from an ended job, unset them, or pass "
                            "--mode=local to run on this machine alone",
                            e.what(), e.exit_code() == exit_code::kTimeout ? " (--bootstrap-timeout)" : "", announced,
                            server_uri_names()),
                e.exit_code());
  }
  if (client) return client;
  if (options.mode == LaunchMode::kPmix)
    throw UsageError("--mode=pmix: hyrun was not started by a PMIx server (use srun --mpi=pmix, or mpirun)");
  if (const int tasks = slurm_step_tasks(); tasks > 1)
    throw UsageError(fmt::format(
        "this srun step has {} tasks but no PMIx server: start hyrun with srun --mpi=pmix (or pass --mode=local to run "
        "each task as an independent job)",
        tasks));
  return std::nullopt;
}

int run_hybrid(const LaunchOptions& options, SignalEvents& signals, pmix::ClientProcess& pmix) {
  job_event_origin() = pmix.hostname();
  // The helper outlives the ranks: it says PMIx_Finalize for this task after them.
  spare_helper(pmix.pid());
  spdlog::info("hybrid mode: {}, {} ranks per task, {} ranks in all", pmix.describe(), options.ranks,
               pmix.job_size() * options.ranks);
  PmixExchange exchange(pmix);
  const int code = run_launch(options, signals, exchange);
  // PMIx_Finalize with the launcher above, given what PMIx_Init was, unless a signal asks
  // hyrun to end: a server ending hundreds of nodes at once may be slow to answer.
  pmix.finish(options.bootstrap_timeout, [&signals] { return signals.pending_stop().has_value(); });
  return code;
}

}  // namespace hyrun
