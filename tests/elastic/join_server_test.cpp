// The join protocol and rank 0's join server over real loopback TCP: proofs, refusals,
// readiness probes, and the reference's rank assignment (lowest released, else next).
#include "join_server.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <future>
#include <thread>

#include "captured_log.hpp"
#include "hyrun/common/error.hpp"
#include "hyrun/common/unique_fd.hpp"
#include "join_protocol.hpp"

namespace hyrun::ep::elastic {
namespace {

using namespace std::chrono_literals;

TEST(JoinProtocol, AProofHoldsForItsTokenNonceCountAndHostOnly) {
  const std::string nonce = join::new_nonce();
  ASSERT_EQ(nonce.size(), 32u);
  EXPECT_NE(nonce, join::new_nonce());
  const join::Request r{2, "node-b", join::proof("token", nonce, 2, "node-b")};
  EXPECT_TRUE(join::proves(r, "token", nonce));
  EXPECT_FALSE(join::proves(r, "other", nonce));
  EXPECT_FALSE(join::proves(r, "token", join::new_nonce()));
  EXPECT_FALSE(join::proves({3, "node-b", r.proof}, "token", nonce));
  EXPECT_FALSE(join::proves({2, "node-c", r.proof}, "token", nonce));
}

TEST(JoinProtocol, AGreetingOfAnotherVersionIsNamedAndNothingElseOfIt) {
  const std::string nonce(32, 'a');
  EXPECT_EQ(join::parse_greeting(join::greeting(nonce).substr(0, 49)), nonce);
  try {
    (void)join::parse_greeting("hyrun-ep-join v1 " + nonce);
    ADD_FAILURE() << "a v1 greeting was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the join server speaks v1 of the join protocol, this ep-elastic v2"),
              std::string::npos)
        << e.what();
  }
  for (const std::string& other :
       std::vector<std::string>{"hyrun-ep-join v1\x1b[2J " + nonce, "hyrun-ep-join vv " + nonce, "SSH-2.0-x"})
    EXPECT_FALSE(join::parse_greeting(other)) << other;
}

TEST(JoinProtocol, RequestsAreParsedStrictly) {
  const std::string good = join::format_request({4, "n1", std::string(64, 'a')});
  ASSERT_TRUE(join::parse_request(good.substr(0, good.size() - 1)));
  for (const std::string& bad :
       std::vector<std::string>{"join 0 n1 " + std::string(64, 'a'), "join 5000 n1 " + std::string(64, 'a'),
                                "join 2 n1 " + std::string(63, 'a'), "join 2 n1 " + std::string(64, 'G'),
                                "join 2 n/1 " + std::string(64, 'a'), "join 2", "hello"})
    EXPECT_FALSE(join::parse_request(bad)) << bad;
}

TEST(RankPool, GivesTheLowestReleasedRankElseTheNext) {
  RankPool pool(4, 8);  // ranks 0..3 belong to the first launch
  EXPECT_EQ(pool.take(2).ranks, (std::vector<int>{4, 5}));
  pool.release(5);
  pool.release(2);
  EXPECT_EQ(pool.take(3).ranks, (std::vector<int>{2, 5, 6}));
  EXPECT_EQ(pool.take(1).ranks, (std::vector<int>{7}));
  EXPECT_THROW(pool.take(1), Error);
}

TEST(RankPool, LaunchesOnOneHostGetLocalRanksNotInUse) {
  RankPool pool(4, 10, "a");  // the first launch: ranks 0..3 at local ranks 0..3 of host a
  const auto wave1 = pool.take(4, "a");
  EXPECT_EQ(wave1.ranks, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(wave1.local_ranks, (std::vector<int>{4, 5, 6, 7})) << "GPUs 4..7, not the first launch's 0..3";
  EXPECT_EQ(pool.take(1, "b").local_ranks, (std::vector<int>{0})) << "another host starts at 0";
  pool.release(6);  // left or killed: its rank and its slot are free again
  pool.release(5);
  const auto back = pool.take(2, "a");
  EXPECT_EQ(back.ranks, (std::vector<int>{5, 6}));
  EXPECT_EQ(back.local_ranks, (std::vector<int>{5, 6}));
}

TEST(RankPool, RanksTakenAndNeverJoinedGoBackWhenTheirLaunchEnds) {
  RankPool pool(2, 6, "a");
  const auto launch = pool.take(3, "b");
  ASSERT_EQ(launch.ranks, (std::vector<int>{2, 3, 4}));
  pool.joined(3);
  EXPECT_EQ(pool.give_back_pending(launch.ranks), (std::vector<int>{2, 4}));
  EXPECT_EQ(pool.give_back_pending(launch.ranks), (std::vector<int>{})) << "given back once";
  const auto next = pool.take(3, "b");
  EXPECT_EQ(next.ranks, (std::vector<int>{2, 4, 5}));
  EXPECT_EQ(next.local_ranks, (std::vector<int>{0, 2, 3})) << "rank 3 keeps its slot 1";
  pool.release(5);  // left: taken again, it is pending again
  EXPECT_EQ(pool.take(1, "b").ranks, (std::vector<int>{5}));
  EXPECT_EQ(pool.give_back_pending({5}), (std::vector<int>{5}));
}

TEST(RankPool, RefusesMoreThanItHasAndTakesNothingThen) {
  RankPool pool(6, 8);
  pool.release(3);
  EXPECT_THROW(pool.take(4), Error);
  EXPECT_EQ(pool.take(3).ranks, (std::vector<int>{3, 6, 7}));
}

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

/// A connection that only opens, as a flood's would: connect() without waiting for it.
UniqueFd open_idle(int port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  EXPECT_TRUE(rc == 0 || errno == EINPROGRESS) << std::strerror(errno);
  return fd;
}

class JoinServerTest : public ::testing::Test {
 protected:
  /// A launch that asks for `count` ranks and goes on running (its connection stays open).
  join::Grant ask(int count, const std::string& host, std::chrono::milliseconds timeout) {
    launches.push_back(join::request_ranks("127.0.0.1", server.port(), "the-token", count, host, timeout));
    return launches.back().grant;
  }

  RankPool pool{2, 6};
  JoinServer server{0, "the-token", join::Grant{{}, {}, 6, 2, 0, "00ff"}, "root-host", pool};
  std::vector<join::Membership> launches;  // the launches that asked and still run
};

TEST_F(JoinServerTest, GrantsRanksToALaunchThatKnowsTheToken) {
  const auto g = ask(2, "node-b", 5s);
  EXPECT_EQ(g.ranks, (std::vector<int>{2, 3}));
  EXPECT_EQ(g.local_ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(g.world_size, 6);
  EXPECT_EQ(g.launch_ranks, 2);
  EXPECT_EQ(g.node_rank, 1);
  EXPECT_EQ(g.root_address, "00ff");
  const auto same_host = ask(1, "node-b", 5s);
  EXPECT_EQ(same_host.ranks, (std::vector<int>{4}));
  EXPECT_EQ(same_host.node_rank, 1) << "one node index per host";
  EXPECT_EQ(ask(1, "root-host", 5s).node_rank, 0);
}

// A launch that fails or is stopped before its ranks join the job gives them back (its
// connection ends), so that the retry the timeout message invites can bring them.
TEST_F(JoinServerTest, ALaunchThatEndsBeforeItsRanksJoinGivesThemBack) {
  join::Membership failed = join::request_ranks("127.0.0.1", server.port(), "the-token", 2, "node-b", 5s);
  ASSERT_EQ(failed.grant.ranks, (std::vector<int>{2, 3}));
  failed.connection.reset();  // its ranks never started
  const auto retry = ask(2, "node-b", 5s);
  EXPECT_EQ(retry.ranks, (std::vector<int>{2, 3})) << "the ranks of the launch that ended";
  EXPECT_EQ(retry.local_ranks, (std::vector<int>{0, 1})) << "and their binding slots";
}

TEST_F(JoinServerTest, ALaunchWhoseRanksJoinedKeepsThemWhenItsConnectionEnds) {
  join::Membership launch = join::request_ranks("127.0.0.1", server.port(), "the-token", 2, "node-b", 5s);
  ASSERT_EQ(launch.grant.ranks, (std::vector<int>{2, 3}));
  pool.joined(2);  // rank 2's process joined; rank 3's never did
  launch.connection.reset();
  EXPECT_EQ(ask(1, "node-b", 5s).ranks, (std::vector<int>{3}));
  EXPECT_EQ(ask(2, "node-b", 5s).ranks, (std::vector<int>{4, 5})) << "rank 2 stays with the job";
}

TEST_F(JoinServerTest, RefusesAWrongTokenAndGivesNothingAway) {
  try {
    join::request_ranks("127.0.0.1", server.port(), "another-token", 2, "node-b", 5s);
    FAIL() << "a wrong token was admitted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("its proof does not match this job's token"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ask(2, "node-b", 5s).ranks, (std::vector<int>{2, 3}));
}

TEST_F(JoinServerTest, AProbeOrGarbageAssignsNothingAndTheServerGoesOn) {
  ::close(connect_to(server.port()));  // the readiness probe: connect, close
  const int fd = connect_to(server.port());
  const auto greeting = join::read_line(fd, join::Clock::now() + 5s, "test");
  ASSERT_TRUE(greeting && join::parse_greeting(*greeting));
  join::write_all(fd, std::string(join::kMaxLine + 10, 'x'), "test");  // an overlong line
  ::close(fd);
  EXPECT_EQ(ask(4, "node-b", 5s).ranks, (std::vector<int>{2, 3, 4, 5}));
  EXPECT_THROW(ask(1, "node-b", 5s), Error) << "none left";
}

TEST_F(JoinServerTest, IdleConnectionsDoNotHoldALaunchBack) {
  // Each held the server for its whole request deadline, one after another: 20 of them
  // kept a real launch out for a minute.
  std::vector<UniqueFd> idle;
  for (int i = 0; i < 20; ++i) idle.push_back(open_idle(server.port()));
  EXPECT_EQ(ask(2, "node-b", 2s).ranks, (std::vector<int>{2, 3}));
}

TEST_F(JoinServerTest, AFloodOfConnectionsLeavesALaunchAdmitted) {
  // More than the server keeps waiting from one peer and in all: it sheds the oldest, and a
  // launch that asks within a round trip still gets in, during the flood and after it.
  std::vector<UniqueFd> flood;
  for (int i = 0; i < 300; ++i) flood.push_back(open_idle(server.port()));
  EXPECT_EQ(ask(1, "node-b", 5s).ranks, (std::vector<int>{2}));
  for (int i = 0; i < 100; ++i) flood.push_back(open_idle(server.port()));
  EXPECT_EQ(ask(1, "node-b", 5s).ranks, (std::vector<int>{3}));
  flood.clear();
  EXPECT_EQ(ask(1, "node-b", 5s).ranks, (std::vector<int>{4}));
}

TEST_F(JoinServerTest, ATricklingConnectionEndsAtTheDeadlineFromItsAccept) {
  // One byte at a time, each before the previous read's deadline would have run out: the
  // deadline still counts from the accept.
  const int fd = connect_to(server.port());
  const UniqueFd owner(fd);
  ASSERT_TRUE(join::read_line(fd, join::Clock::now() + 5s, "test"));
  const auto start = join::Clock::now();
  bool closed = false;
  for (int i = 0; i < 40 && !closed; ++i) {
    std::this_thread::sleep_for(250ms);
    closed = ::send(fd, "j", 1, MSG_NOSIGNAL) != 1;
    char c;
    closed = closed || ::recv(fd, &c, 1, MSG_DONTWAIT) == 0;
  }
  EXPECT_TRUE(closed) << "a connection trickling one byte per 250 ms was held for 10 s";
  EXPECT_LT(join::Clock::now() - start, 10s);
}

// CPU milliseconds this process used so far (every thread).
long cpu_ms() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000L + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1000L;
}

// The child's side of the test below: a join server, then (on the parent's word) every
// descriptor under the limit taken; then the CPU milliseconds of 1 s of its loop.
[[noreturn]] void serve_out_of_descriptors(int to_parent, int from_parent) {
  RankPool pool{2, 6};
  JoinServer server{0, "the-token", join::Grant{{}, {}, 6, 2, 0, "00ff"}, "root-host", pool};
  int word = server.port();
  char go;
  if (::write(to_parent, &word, sizeof word) != sizeof word || ::read(from_parent, &go, 1) != 1) ::_exit(1);
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = 64;
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) ::_exit(2);
  std::vector<UniqueFd> filler;
  for (UniqueFd f(::open("/dev/null", O_RDONLY | O_CLOEXEC)); f;
       f = UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC)))
    filler.push_back(std::move(f));
  if (::write(to_parent, &word, sizeof word) != sizeof word || ::read(from_parent, &go, 1) != 1) ::_exit(1);
  const long start = cpu_ms();
  std::this_thread::sleep_for(1s);
  word = static_cast<int>(cpu_ms() - start);
  ::_exit(::write(to_parent, &word, sizeof word) == sizeof word ? 0 : 1);
}

TEST(JoinServerDescriptors, OutOfDescriptorsItShedsAWaitingConnectionAndNeverSpins) {
#ifdef __SANITIZE_ADDRESS__
  GTEST_SKIP() << "starves the process of descriptors, which the sanitizer runtime needs";
#endif
  int up[2], down[2];
  ASSERT_EQ(::pipe(up), 0);
  ASSERT_EQ(::pipe(down), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) serve_out_of_descriptors(up[1], down[0]);
  const UniqueFd from_child(up[0]), to_child(down[1]), unused1(up[1]), unused2(down[0]);
  const auto word = [&] {
    int w = -1;
    pollfd p{up[0], POLLIN, 0};
    return ::poll(&p, 1, 20000) > 0 && ::read(up[0], &w, sizeof w) == sizeof w ? w : -1;
  };
  const int port = word();
  std::vector<UniqueFd> idle;  // accepted and greeted: waiting connections the server may shed
  for (int i = 0; i < 8; ++i) {
    idle.push_back(UniqueFd(connect_to(port)));
    ASSERT_TRUE(join::read_line(idle.back().get(), join::Clock::now() + 5s, "test"));
  }
  ASSERT_EQ(::write(down[1], "g", 1), 1);
  EXPECT_GE(word(), 0) << "the child could not take its descriptors";
  // Shorter than the waiting connections' deadline: only shedding one of them makes room.
  EXPECT_EQ(join::request_ranks("127.0.0.1", port, "the-token", 1, "node-b", 2s).grant.ranks, (std::vector<int>{2}));
  std::this_thread::sleep_for(JoinServer::kRequestDeadline + 500ms);  // the rest expired: nothing left to shed
  for (int i = 0; i < 4; ++i) idle.push_back(open_idle(port));        // in the backlog; accept4 gives EMFILE
  ASSERT_EQ(::write(down[1], "g", 1), 1);
  const int ms = word();
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ASSERT_GE(ms, 0) << "no answer from the child";
  EXPECT_LT(ms, 100) << "CPU milliseconds in 1 s of the server's loop while accept4 fails with EMFILE";
}

// Made before the server, dropped after it: the server's thread logs.
using test_support::CapturedLog;

bool printable(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= ' ' && c < 127; });
}

TEST(JoinServerRefusals, NeitherLogNorReplyEchoesThePeerAndTheWarningsAreBounded) {
  // A line that CloudAI's check takes for a failed run, with terminal escapes: sent to the
  // port during a run, none of it may reach the job's log (or the peer, as a reflector).
  const std::string hostile = "Traceback (most recent call last):\x1b[2J\r\x07 srun: error: x";
  CapturedLog log;
  std::vector<std::string> replies;
  {
    RankPool pool{2, 6};
    JoinServer server{0, "the-token", join::Grant{{}, {}, 6, 2, 0, "00ff"}, "root-host", pool};
    for (int i = 0; i < 30; ++i) {
      const int fd = connect_to(server.port());
      const auto greeting = join::read_line(fd, join::Clock::now() + 5s, "test");
      ASSERT_TRUE(greeting && join::parse_greeting(*greeting));
      join::write_all(fd, hostile + "\n", "test");
      const auto reply = join::read_line(fd, join::Clock::now() + 5s, "test");
      ::close(fd);
      ASSERT_TRUE(reply);
      replies.push_back(*reply);
    }
    // The server goes on: a real launch still joins.
    EXPECT_EQ(join::request_ranks("127.0.0.1", server.port(), "the-token", 1, "node-b", 5s).grant.ranks,
              (std::vector<int>{2}));
  }
  for (const auto& reply : replies) {
    EXPECT_TRUE(reply.starts_with("refused ")) << reply;
    EXPECT_TRUE(printable(reply)) << reply;
    EXPECT_EQ(reply.find("Traceback"), std::string::npos) << reply;
    EXPECT_EQ(reply.find("srun"), std::string::npos) << reply;
  }
  EXPECT_NE(replies[0].find("not the join protocol"), std::string::npos) << replies[0];
  int warnings = 0;
  for (const auto& line : log.lines()) {
    EXPECT_EQ(line.find("Traceback"), std::string::npos) << line;
    EXPECT_EQ(line.find("srun"), std::string::npos) << line;
    EXPECT_EQ(line.find('\x1b'), std::string::npos) << line;
    warnings += line.starts_with("warning ");
  }
  EXPECT_LE(warnings, 11) << "30 refusals: the first 10 one by one, then at most a summary";
  EXPECT_GE(warnings, 1);
}

TEST(JoinClient, NamesTheServerThatNeverAnswers) {
  RankPool pool(1, 2);
  int port;
  {
    JoinServer gone(0, "t", join::Grant{{}, {}, 2, 1, 0, "00"}, "h", pool);
    port = gone.port();
  }
  EXPECT_THROW(join::request_ranks("127.0.0.1", port, "t", 1, "h", 500ms), TimeoutError);
}

/// A loopback port that listens and never accepts: connections wait in its backlog.
struct Listener {
  UniqueFd fd{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  int port = 0;
  explicit Listener(int backlog) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd.get(), backlog), 0);
    socklen_t length = sizeof a;
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &length);
    port = ntohs(a.sin_port);
  }
};

/// A listening port whose backlog is full: the kernel drops further handshakes, and a
/// blocking connect() would retry them for about two minutes.
struct FullBacklog {
  Listener listener{0};
  int port = listener.port;
  std::vector<UniqueFd> fillers;
  FullBacklog() {
    for (int i = 0; i < 4; ++i) fillers.push_back(open_idle(port));
  }
};

/// Runs `request` on a thread of its own and gives its outcome, or fails the test when it
/// has not returned after `limit` (the thread is left behind: the test binary ends).
std::optional<std::exception_ptr> outcome_within(std::function<void()> request, std::chrono::seconds limit) {
  auto done = std::make_shared<std::promise<std::exception_ptr>>();
  auto result = done->get_future();
  std::thread([request = std::move(request), done] {
    try {
      request();
      done->set_value(nullptr);
    } catch (...) {
      done->set_value(std::current_exception());
    }
  }).detach();
  if (result.wait_for(limit) != std::future_status::ready) return std::nullopt;
  return result.get();
}

TEST(JoinClient, HonoursItsTimeoutAgainstAServerWhoseBacklogIsFull) {
  FullBacklog server;
  const auto outcome =
      outcome_within([port = server.port] { join::request_ranks("127.0.0.1", port, "t", 1, "h", 1000ms); }, 30s);
  ASSERT_TRUE(outcome) << "a join with a 1000 ms timeout had not returned after 30 s";
  try {
    std::rethrow_exception(*outcome);
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("within 1000 ms"), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a timeout: " << e.what();
  }
}

TEST(JoinClient, AStopSignalEndsEveryWait) {
  // Waiting on a port with nothing behind it, on a full backlog, and for a server's answer:
  // the stop check ends each wait, long before the timeout.
  FullBacklog full;
  RankPool pool(1, 2);
  int nothing;
  {
    JoinServer gone(0, "t", join::Grant{{}, {}, 2, 1, 0, "00"}, "h", pool);
    nothing = gone.port();
  }
  const Listener mute(16);  // takes connections into its backlog, never greets
  for (const int port : {nothing, full.port, mute.port}) {
    const auto asked = join::Clock::now() + 300ms;
    const auto outcome = outcome_within(
        [port, asked] {
          join::request_ranks("127.0.0.1", port, "t", 1, "h", 600s, [asked] {
            if (join::Clock::now() >= asked) throw Error("stopped by SIGTERM", 128 + SIGTERM);
          });
        },
        30s);
    ASSERT_TRUE(outcome) << "port " << port << ": the stop check did not end the wait within 30 s";
    try {
      std::rethrow_exception(*outcome);
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 128 + SIGTERM) << "port " << port << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace hyrun::ep::elastic
