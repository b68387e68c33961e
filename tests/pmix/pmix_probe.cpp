// pmix-probe: every process puts a record, fences, reads every other process's record
// and checks it, then prints one line about itself. Fault modes prove that PMIx waits
// end with a clear error in bounded time instead of hanging.
//
// Output (stdout, one line per process, parsed by the cluster tests):
//   pmix-probe rank=R size=S host=H node=N local=L/LS init_ms=I fence_ms=F peers_ok=P
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <thread>

#include "hyrun/common/error.hpp"
#include "hyrun/common/logging.hpp"
#include "hyrun/pmix/client.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kRecordKey = "hyrun.probe.record";

std::string record_of(const hyrun::pmix::Client& client) {
  const auto node = client.node_id();
  return "rank=" + std::to_string(client.rank()) + " host=" + client.hostname() +
         " node=" + (node ? std::to_string(*node) : std::string("none")) + " nspace=" + client.nspace();
}

std::string text_of(const std::vector<std::byte>& bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

std::string field(const std::string& record, const std::string& name) {
  const auto at = record.find(name + "=");
  if (at == std::string::npos) return {};
  const auto begin = at + name.size() + 1;
  return record.substr(begin, record.find(' ', begin) - begin);
}

long ms_since(Clock::time_point since) {
  return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pmix-probe: PMIx put/fence/get across every process of a job"};
  int skip_fence_rank = -1;
  int stall_seconds = 60;
  int fence_timeout_ms = 10000;
  int get_timeout_ms = 5000;
  int expect_hosts = 0;
  bool expect_no_server = false;
  bool get_missing = false;
  bool no_abort = false;
  std::string log_level = hyrun::log_level_from_environment("info");
  app.add_option("--skip-fence-on-rank", skip_fence_rank,
                 "this rank never reaches the fence; it sleeps --stall-seconds instead (fault test)");
  app.add_option("--stall-seconds", stall_seconds, "how long the skipping rank sleeps");
  app.add_option("--fence-timeout-ms", fence_timeout_ms, "time limit of the fence");
  app.add_option("--get-timeout-ms", get_timeout_ms, "time limit of each get");
  app.add_option("--expect-hosts", expect_hosts, "fail unless the records name this many distinct hosts and nodes");
  app.add_flag("--expect-no-server", expect_no_server, "succeed only when no PMIx server launched us");
  app.add_flag("--get-missing", get_missing, "after the fence, get a key nobody put (fault test)");
  app.add_flag("--no-abort", no_abort, "on error exit with its code instead of aborting the whole job");
  app.add_option("--log-level", log_level, "spdlog level");
  CLI11_PARSE(app, argc, argv);

  hyrun::init_logging("pmix-probe", log_level);
  const auto start = Clock::now();
  auto connected = [&] {
    try {
      return hyrun::pmix::Client::connect();
    } catch (const hyrun::Error& e) {
      spdlog::error("{}", e.what());
      std::exit(e.exit_code());
    }
  }();
  const long init_ms = ms_since(start);
  if (!connected) {
    std::printf("pmix-probe: no PMIx server\n");
    return expect_no_server ? 0 : 1;
  }
  if (expect_no_server) {
    spdlog::error("expected no PMIx server, but connected to namespace {}", connected->nspace());
    return 1;
  }
  auto& client = *connected;

  try {
    const std::string mine = record_of(client);
    client.put(kRecordKey, std::as_bytes(std::span(mine)));
    client.commit();

    if (client.rank() == skip_fence_rank) {
      spdlog::warn("rank {} skips the fence on purpose and sleeps {} s", client.rank(), stall_seconds);
      std::this_thread::sleep_for(std::chrono::seconds(stall_seconds));
      return 3;
    }
    const auto fence_start = Clock::now();
    client.fence(std::chrono::milliseconds(fence_timeout_ms));
    const long fence_ms = ms_since(fence_start);

    if (get_missing)
      client.get((client.rank() + 1) % client.job_size(), "hyrun.probe.nobody-put-this",
                 std::chrono::milliseconds(get_timeout_ms));

    std::set<std::string> hosts{client.hostname()};
    std::set<std::string> nodes{field(mine, "node")};
    int peers_ok = 0;
    for (int r = 0; r < client.job_size(); ++r) {
      if (r == client.rank()) continue;
      const std::string theirs = text_of(client.get(r, kRecordKey, std::chrono::milliseconds(get_timeout_ms)));
      if (field(theirs, "rank") != std::to_string(r) || field(theirs, "nspace") != client.nspace())
        throw hyrun::Error("record of rank " + std::to_string(r) + " is wrong: '" + theirs + "'");
      hosts.insert(field(theirs, "host"));
      nodes.insert(field(theirs, "node"));
      ++peers_ok;
    }
    if (expect_hosts > 0 &&
        (static_cast<int>(hosts.size()) != expect_hosts || static_cast<int>(nodes.size()) != expect_hosts))
      throw hyrun::Error("records name " + std::to_string(hosts.size()) + " hosts and " + std::to_string(nodes.size()) +
                         " node ids, expected " + std::to_string(expect_hosts) + " of each");

    const auto node = client.node_id();
    std::printf("pmix-probe rank=%d size=%d host=%s node=%s local=%d/%d init_ms=%ld fence_ms=%ld peers_ok=%d\n",
                client.rank(), client.job_size(), client.hostname().c_str(),
                node ? std::to_string(*node).c_str() : "none", client.local_rank_on_node(), client.local_size_on_node(),
                init_ms, fence_ms, peers_ok);
    std::fflush(stdout);
    return 0;
  } catch (const hyrun::Error& e) {
    spdlog::error("{}", e.what());
    if (no_abort) return e.exit_code();
    client.abort(e.exit_code(), e.what());
  }
}
