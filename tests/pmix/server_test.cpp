// hyrun's PMIx server after its owner let it go: when a client was lost without finalizing,
// ~Server leaves libpmix running (its finalize crashes then), and libpmix's thread may still
// take clients, hear a PMIx_Finalize and call the server module. Those upcalls must not touch
// the Server that is gone: at 512 simulated nodes of 4 ranks, nodes torn down after an abort
// died of "corrupted double-linked list" in libpmix's thread (docs/reliability.md). Under
// AddressSanitizer (scripts/sanitize.sh) a use of the freed Server fails this test. It leaves
// libpmix running in its process, which then cannot start another server: one run a process
// (ctest starts each test in its own; --gtest_repeat cannot repeat it).
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hyrun/pmix/job_map.hpp"
#include "hyrun/pmix/server.hpp"

extern char** environ;

namespace hyrun::pmix {
namespace {

using Clock = std::chrono::steady_clock;

// A client process: pmix-bare-client with `args`, in this environment and `env`.
pid_t spawn_client(const std::vector<std::pair<std::string, std::string>>& env, const std::vector<std::string>& args) {
  std::vector<std::string> entries;
  for (char** e = environ; *e != nullptr; ++e) entries.emplace_back(*e);
  for (const auto& [name, value] : env) entries.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (auto& e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> words{PMIX_CLIENT_PATH};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  EXPECT_EQ(::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), envp.data()), 0);
  return pid;
}

// The events of `server` until one of `kind` for `rank` came, for at most 30 s.
bool await_event(Server& server, ClientEvent::Kind kind, std::uint32_t rank) {
  const auto until = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < until) {
    for (const auto& e : server.take_events())
      if (e.kind == kind && e.rank == rank) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// The exit status of `pid`, waited for at most 30 s (then killed: nullopt).
std::optional<int> await_exit(pid_t pid) {
  const auto until = Clock::now() + std::chrono::seconds(30);
  int status = 0;
  while (Clock::now() < until) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return std::nullopt;
}

TEST(PmixServer, ClientsThatComeAfterTheServerWasLeftRunningTouchNothingOfIt) {
  const auto dir = std::filesystem::temp_directory_path() / ("hyrun-server-lifetime-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
  std::vector<std::pair<std::string, std::string>> second_env;
  {
    Server server(dir.string(), NodeName{"n0", 0}, nullptr);
    JobMap map;
    map.nspace = "hyrun.lifetime." + std::to_string(::getpid());
    map.hosts = {"n0"};
    map.ranks = {{0, 1}};
    map.local_cpus = {{}, {}};
    map.tmpdir = dir.string();
    server.register_job(map);
    second_env = server.client_environment(1);
    // Rank 0 connects and waits in a fence for rank 1, then dies without finalizing: the
    // server is left running when it goes.
    const pid_t first = spawn_client(server.client_environment(0), {"put", "16"});
    ASSERT_TRUE(await_event(server, ClientEvent::Kind::kConnected, 0)) << "rank 0 never connected";
    ::kill(first, SIGKILL);
    ::waitpid(first, nullptr, 0);
  }
  // libpmix still runs; rank 1 connects and finalizes: libpmix calls the module's upcalls.
  const pid_t second = spawn_client(second_env, {});
  const auto status = await_exit(second);
  ASSERT_TRUE(status.has_value()) << "rank 1 did not end within 30 s";
  ASSERT_TRUE(WIFEXITED(*status)) << "rank 1 ended by signal " << WTERMSIG(*status);
  EXPECT_EQ(WEXITSTATUS(*status), 0) << "rank 1 was not served (pmix-bare-client: 3 when refused)";
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // libpmix's thread handles its end
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

}  // namespace
}  // namespace hyrun::pmix
