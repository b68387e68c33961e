#include "hyrun/launcher/local_mode.hpp"

#include <fmt/format.h>
#include <unistd.h>
#include <array>
#include <chrono>

#include <climits>

#include "hyrun/common/error.hpp"
#include "hyrun/common/hex.hpp"
#include "hyrun/common/random_bytes.hpp"
#include "hyrun/launcher/launch_sequence.hpp"
#include "hyrun/launcher/master_endpoint.hpp"
#include "hyrun/launcher/node_launch.hpp"
#include "hyrun/launcher/root_exchange.hpp"

namespace hyrun {
namespace {

// Local mode is a job of one node: its records go nowhere, and what it reads back is what
// it put. It has no peers, so the sequence never aborts through it.
class LocalExchange final : public RootExchange {
 public:
  int task() const override { return 0; }
  int tasks() const override { return 1; }
  binding::NodeTaskShare task_share() const override { return {}; }
  std::string host() const override {
    char name[HOST_NAME_MAX + 1] = {};
    return ::gethostname(name, sizeof name - 1) == 0 ? name : "localhost";
  }
  bool has_peers() const override { return false; }
  // The namespace is unique per job on this host (Open MPI derives its job id, and so its
  // segments' names, from it) and has a random part: a client's handshake names it, and
  // the pid and a clock reading alone could be guessed from /proc (docs/security.md).
  std::optional<ServedJob> served_job() const override {
    const std::string name = host();
    std::array<std::byte, 8> random{};
    fill_random(random, "the PMIx namespace");
    return ServedJob{fmt::format("hyrun.{}.{}.{}", name, ::getpid(), to_hex(random)), {name}};
  }

  void offer_rendezvous(RootRecord&, NodeLaunch& node) override {
    // One node: loopback is reachable by every rank, and gloo finds its own interface.
    node.set_rendezvous("127.0.0.1", pick_free_tcp_port(), fmt::format("hyrun-local-{}", ::getpid()), "");
  }
  void take_rendezvous(const RootRecord&, NodeLaunch&) override {}

  void put_node(const NodeRecord& record) override { node_ = record; }
  void put_root(const RootRecord& record) override { root_ = record; }
  bool fence(std::chrono::milliseconds, const std::function<bool()>&) override { return true; }
  std::optional<std::vector<NodeRecord>> node_records(std::chrono::milliseconds,
                                                      const std::function<bool()>&) override {
    return std::vector<NodeRecord>{node_};
  }
  std::optional<RootRecord> root_record(std::chrono::milliseconds, const std::function<bool()>&) override {
    return root_;
  }

  [[noreturn]] void abort(int code, const std::string& why) override { throw Error(why, code); }

 private:
  NodeRecord node_;
  RootRecord root_;
};

}  // namespace

int run_local(const LaunchOptions& options, SignalEvents& signals) {
  LocalExchange exchange;
  return run_launch(options, signals, exchange);
}

}  // namespace hyrun
