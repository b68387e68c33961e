// test-rank: a rank program whose behaviour the integration tests choose, to exercise
// hyrun's failure handling with real processes and the real worker-library bootstrap.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "hyrun/common/death_notice.hpp"
#include "hyrun/worker.hpp"

namespace {

int env_rank() {
  const char* r = std::getenv("HYRUN_RANK");
  return r ? std::atoi(r) : -1;
}

// Written atomically (rename), so a test never reads a half-written pid.
void write_pid_file(const std::string& dir, const std::string& name, pid_t pid) {
  const std::string path = dir + "/" + name;
  const std::string tmp = path + ".tmp";
  if (FILE* f = std::fopen(tmp.c_str(), "w")) {
    std::fprintf(f, "%d\n", pid);
    std::fclose(f);
    std::rename(tmp.c_str(), path.c_str());
  }
}

// Asks hyrun for death notices on the control socket, as the worker library does (which reads
// them on a thread of its own: a test reads them itself). Returns the socket.
int ask_for_death_notices(const std::string& option) {
  const char* fd_text = std::getenv("HYRUN_CONTROL_FD");
  if (!fd_text) throw hyrun::Error(option + ": HYRUN_CONTROL_FD is not set");
  const int fd = std::atoi(fd_text);
  const std::string_view ask = hyrun::kHandlesDeathsMessage;
  if (::send(fd, ask.data(), ask.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(ask.size()))
    throw hyrun::Error(option + ": could not ask for death notices");
  return fd;
}

// --await-deaths: says that it handles deaths, prints every death notice hyrun sends ("rank R
// told that rank D died"), and returns once it was told of every rank of `ranks`; throws after
// 40 s without them all (within the cluster tests' srun limit of 60 s), or when hyrun closes
// the channel.
void await_deaths(const std::vector<int>& ranks, int rank) {
  const char* size_text = std::getenv("HYRUN_WORLD_SIZE");
  if (!size_text) throw hyrun::Error("--await-deaths: HYRUN_WORLD_SIZE is not set");
  const int world_size = std::atoi(size_text);
  for (const int r : ranks)
    if (r < 0 || r >= world_size)
      throw hyrun::UsageError("--await-deaths: rank " + std::to_string(r) + " is not a rank of this job (0 to " +
                              std::to_string(world_size - 1) + ")");
  const int fd = ask_for_death_notices("--await-deaths");
  std::printf("rank %d handles deaths\n", rank);
  std::fflush(stdout);
  std::set<int> waiting(ranks.begin(), ranks.end());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(40);
  while (!waiting.empty()) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    const int ready = left > 0 ? ::poll(&p, 1, static_cast<int>(left)) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready != 1) throw hyrun::TimeoutError("--await-deaths: not told of every rank's death within 40 s");
    std::array<char, 64> message;
    const ssize_t n = ::recv(fd, message.data(), message.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw hyrun::Error("--await-deaths: hyrun closed the control channel");
    const auto dead = hyrun::parse_rank_died(std::string_view(message.data(), static_cast<std::size_t>(n)), world_size);
    if (!dead) throw hyrun::Error("--await-deaths: a message on the control channel is no death notice");
    std::printf("rank %d told that rank %d died\n", rank, *dead);
    std::fflush(stdout);
    waiting.erase(*dead);
  }
}

// Asks for death notices on the control socket (as the worker library does), waits until
// hyrun has queued one, then dies with it unread right after announcing the death: the
// order that once made hyrun lose the announcement (the kernel's ECONNRESET). With a
// `go_file`, it first creates `go_file`.ready and waits for `go_file`, so that the test can
// stop hyrun in between and hyrun reads nothing before the death.
void kill_with_unread_notice(const std::string& go_file) {
  const int fd = ask_for_death_notices("--kill-with-unread-notice-rank");
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 30000) != 1) throw hyrun::Error("--kill-with-unread-notice-rank: no death notice within 30 s");
  if (!go_file.empty()) {
    if (FILE* f = std::fopen((go_file + ".ready").c_str(), "w")) std::fclose(f);
    for (int i = 0; i < 3000 && ::access(go_file.c_str(), F_OK) != 0; ++i) ::usleep(10000);
  }
  hyrun::announce_planned_kill(false, SIGKILL);
  ::raise(SIGKILL);
}

struct Options {
  std::string pid_dir;
  bool no_world = false, exit_before_publish = false, ignore_term = false, spawn_child = false;
  int fail_rank = -1, exit_code = 1, signal_rank = -1, signal_number = SIGKILL, long_line_rank = -1;
  int wrong_token_rank = -1, flood_rank = -1, planned_exit_rank = -1, respawn_rank = -1;
  int announced_code = -1, announce_then_signal_rank = -1, respawn_forever_rank = -1;
  int kill_with_unread_notice_rank = -1;
  std::vector<int> await_deaths;
  std::string go_file;
  long long long_line_bytes = 0, flood_lines = 0;
  std::size_t exchange_bytes = 0;
  int exchange_rounds = 100;
  std::string join_wait_file;
  int join_wait_rank = -1;
  bool ring = false, report_peak_memory = false;
  std::vector<std::string> print_env;
  double sleep_s = 0;
};

void add_options(CLI::App& app, Options& o) {
  app.add_option("--pid-dir", o.pid_dir, "write rank.<R> (and child.<R>) pid files here");
  app.add_flag("--no-world", o.no_world, "do not join the world (never publishes)");
  app.add_flag("--exit-before-publish", o.exit_before_publish, "rank 0 exits 0 before publishing");
  app.add_option("--fail-rank", o.fail_rank);
  app.add_option("--exit-code", o.exit_code);
  app.add_option("--signal-rank", o.signal_rank);
  app.add_option("--signal", o.signal_number);
  app.add_option("--long-line-rank", o.long_line_rank);
  app.add_option("--long-line-bytes", o.long_line_bytes);
  app.add_option("--flood-rank", o.flood_rank);
  app.add_option("--flood-lines", o.flood_lines);
  app.add_option("--wrong-token-rank", o.wrong_token_rank);
  app.add_flag("--ignore-term", o.ignore_term, "ignore SIGTERM, SIGINT and SIGHUP (to test the SIGKILL escalation)");
  app.add_flag("--spawn-child", o.spawn_child, "start a child process that sleeps (to test group cleanup)");
  app.add_option("--exchange-bytes", o.exchange_bytes,
                 "exchange this many bytes with every rank (allgather, contents checked) --exchange-rounds times; "
                 "--signal-rank then dies in the middle of the traffic");
  app.add_option("--exchange-rounds", o.exchange_rounds);
  app.add_option("--join-wait-rank", o.join_wait_rank, "this rank joins the world only once --join-wait-file exists");
  app.add_option("--join-wait-file", o.join_wait_file);
  app.add_flag("--ring", o.ring, "pass a checked message around a ring of all ranks (point-to-point, tag 1)");
  app.add_flag("--report-peak-memory", o.report_peak_memory, "print this process's peak resident memory at the end");
  app.add_option("--sleep", o.sleep_s, "seconds to sleep at the end");
  app.add_option("--print-env", o.print_env,
                 "once the World started, print 'rank R env NAME=value ...' for these variables (- when unset)")
      ->delimiter(',');
  app.add_option("--planned-exit-rank", o.planned_exit_rank,
                 "this rank announces a planned exit, then exits with --exit-code (not a failure)");
  app.add_option("--respawn-rank", o.respawn_rank,
                 "this rank announces a planned exit with restart and kills itself; its new process rejoins rank 0 "
                 "and reports; rank 0 waits for it");
  app.add_option("--announced-code", o.announced_code,
                 "the exit code --planned-exit-rank announces (default: --exit-code, the one it exits with)");
  app.add_option("--announce-then-signal-rank", o.announce_then_signal_rank,
                 "this rank announces a planned exit with code 0, then raises --signal (not what it announced)");
  app.add_option("--respawn-forever-rank", o.respawn_forever_rank,
                 "every process of this rank announces a planned exit with restart and exits 0 (use with --no-world)");
  app.add_option("--kill-with-unread-notice-rank", o.kill_with_unread_notice_rank,
                 "this rank asks hyrun for death notices, waits until one is queued and leaves it unread, then "
                 "announces a planned SIGKILL and raises it (use with --planned-exit-rank for the notice)");
  app.add_option("--await-deaths", o.await_deaths,
                 "every rank asks hyrun for death notices, prints each, and exits 0 once told of all these ranks "
                 "(within 40 s; use with --no-world)")
      ->delimiter(',');
  app.add_option("--go-file", o.go_file,
                 "--kill-with-unread-notice-rank: create FILE.ready once the notice is queued, then wait for FILE");
}

/// What a rank does before anything else: signals ignored, pid files, a child.
void set_up_process(const Options& o, int rank) {
  if (o.ignore_term)
    for (int s : {SIGTERM, SIGINT, SIGHUP}) ::signal(s, SIG_IGN);
  if (!o.pid_dir.empty()) write_pid_file(o.pid_dir, "rank." + std::to_string(rank), getpid());
  if (o.spawn_child) {
    const pid_t child = fork();
    if (child == 0) {
      execlp("sleep", "sleep", "1000", static_cast<char*>(nullptr));
      _exit(127);
    }
    if (!o.pid_dir.empty()) write_pid_file(o.pid_dir, "child." + std::to_string(rank), child);
  }
}

/// --respawn-rank: that rank kills itself once and its new process reports to rank 0, which
/// waits for it. Returns the exit code.
int respawn(hyrun::World& world, const Options& o, int rank) {
  constexpr uint32_t kHelloAgain = 77;
  if (rank == o.respawn_rank && world.incarnation() == 0) {
    hyrun::announce_planned_kill(true, SIGKILL);
    ::raise(SIGKILL);
  }
  if (rank == o.respawn_rank) {
    const int incarnation = world.incarnation();
    world.send(0, std::as_bytes(std::span(&incarnation, 1)), kHelloAgain);
    std::printf("rank %d incarnation %d rejoined\n", rank, incarnation);
    return 0;
  }
  if (rank == 0) {
    const auto deadline = std::chrono::steady_clock::now() + world.timeout();
    bool admitted = false;
    while (!admitted && std::chrono::steady_clock::now() < deadline) {
      for (const auto& r : world.accept_rejoins()) admitted |= r.rank == o.respawn_rank;
      if (!admitted) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!admitted) throw hyrun::TimeoutError("rank 0: the restarted rank never rejoined");
    const auto bytes = world.recv(o.respawn_rank, kHelloAgain);
    int incarnation = -1;
    std::memcpy(&incarnation, bytes.data(), sizeof incarnation);
    std::printf("rank 0: rank %d came back as incarnation %d\n", o.respawn_rank, incarnation);
  }
  std::fflush(stdout);
  return 0;
}

/// --exchange-bytes: every rank sends to every other without pause, so a rank that dies
/// leaves sends to it in flight. False when a contribution arrived corrupted.
bool exchange(hyrun::World& world, const Options& o, int rank) {
  const std::vector<std::byte> mine(o.exchange_bytes, static_cast<std::byte>(rank));
  const auto start = std::chrono::steady_clock::now();
  for (int round = 0; round < o.exchange_rounds; ++round) {
    if (rank == o.signal_rank && std::chrono::steady_clock::now() > start + std::chrono::milliseconds(200))
      ::raise(o.signal_number);
    const auto all = world.allgather(mine);
    for (int r = 0; r < world.size(); ++r)
      for (std::size_t i = 0; i < o.exchange_bytes; ++i)
        if (all[r * o.exchange_bytes + i] != static_cast<std::byte>(r)) {
          std::printf("rank %d: the contribution of rank %d is CORRUPTED\n", rank, r);
          return false;
        }
  }
  std::printf("rank %d: exchange ok\n", rank);
  return true;
}

/// --ring: a token passed around every rank; false when it came back changed.
bool pass_ring(hyrun::World& world, int rank) {
  constexpr uint32_t kRingTag = 1;
  const int next = (rank + 1) % world.size(), prev = (rank + world.size() - 1) % world.size();
  const std::string token = "ring token from rank 0";
  std::string got;
  if (rank == 0) world.send(next, std::as_bytes(std::span(token)), kRingTag);
  const auto bytes = world.recv(prev, kRingTag);
  got.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (rank != 0) world.send(next, bytes, kRingTag);
  std::printf("rank %d: ring %s\n", rank, got == token ? "ok" : "CORRUPTED");
  return got == token;
}

/// VmHWM: the most resident memory this process ever had, in kB.
void print_peak_memory(int rank) {
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f))
      if (std::strncmp(line, "VmHWM:", 6) == 0)
        std::printf("rank %d: peak memory %lld kB\n", rank, std::atoll(line + 6));
    std::fclose(f);
  }
}

/// Joins the World of this rank into `world` as the options say (not with --no-world).
void join_world(std::optional<hyrun::World>& world, const Options& o, int rank) {
  if (rank == o.wrong_token_rank) setenv("HYRUN_JOB_TOKEN", "00000000000000000000000000000000", 1);
  hyrun::WorldOptions options;
  options.peer_error_handling = o.respawn_rank >= 0;  // survivors must outlive the killed process
  if (rank == o.join_wait_rank) {
    for (int i = 0; i < 600 && access(o.join_wait_file.c_str(), F_OK) != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!o.no_world) world.emplace(options);
}

/// The rank's work after it joined (or not): output, traffic, failures. Returns the exit code.
int work(std::optional<hyrun::World>& world, const Options& o, int rank) {
  if (rank == o.long_line_rank) {
    std::string line(static_cast<std::size_t>(o.long_line_bytes), 'x');
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fflush(stdout);
  }
  if (rank == o.flood_rank)
    for (long long i = 0; i < o.flood_lines; ++i) std::printf("flood line %lld of rank %d\n", i, rank);
  if (!o.print_env.empty()) {
    std::string line = "rank " + std::to_string(rank) + " env";
    for (const auto& name : o.print_env) {
      const char* value = std::getenv(name.c_str());
      line += " " + name + "=" + (value ? value : "-");
    }
    std::printf("%s\n", line.c_str());
  }
  std::printf("rank %d ready\n", rank);
  std::fflush(stdout);
  if (rank == o.fail_rank) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return o.exit_code;
  }
  if (o.exchange_bytes > 0 && world && !exchange(*world, o, rank)) return 1;
  if (o.ring && world && !pass_ring(*world, rank)) return 1;
  if (rank == o.signal_rank) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ::raise(o.signal_number);
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(o.sleep_s));
  if (world) world->barrier();
  if (o.report_peak_memory) print_peak_memory(rank);
  std::fflush(stdout);
  return 0;
}

/// Everything after the process set-up. Returns the exit code.
int run(const Options& o, int rank) {
  if (rank == o.respawn_forever_rank) {
    hyrun::announce_planned_exit(true, 0);
    return 0;
  }
  if (rank == o.kill_with_unread_notice_rank) {
    kill_with_unread_notice(o.go_file);
    return 1;  // not reached unless no notice came
  }
  if (rank == o.announce_then_signal_rank) {
    hyrun::announce_planned_exit(false, 0);
    ::raise(o.signal_number);
  }
  if (!o.await_deaths.empty()) {
    await_deaths(o.await_deaths, rank);
    return 0;
  }
  std::optional<hyrun::World> world;
  join_world(world, o, rank);
  if (o.respawn_rank >= 0) return respawn(*world, o, rank);
  if (rank == o.planned_exit_rank) {
    hyrun::announce_planned_exit(false, o.announced_code >= 0 ? o.announced_code : o.exit_code);
    return o.exit_code;
  }
  return work(world, o, rank);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"test-rank: a rank with test-chosen behaviour"};
  Options o;
  add_options(app, o);
  CLI11_PARSE(app, argc, argv);

  const int rank = env_rank();
  set_up_process(o, rank);
  if (o.exit_before_publish && rank == 0) return 0;
  try {
    return run(o, rank);
  } catch (const hyrun::Error& e) {
    std::fprintf(stderr, "test-rank %d: %s\n", rank, e.what());
    return e.exit_code();
  }
}
