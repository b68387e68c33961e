// The node link between two hyrun processes, played by two NodeLink objects over loopback:
// what hybrid mode relies on to tell a lost node from one that finished.
#include "hyrun/link/node_link.hpp"

#include <fmt/format.h>

#include "captured_log.hpp"
#include "forked_node.hpp"
#include "hyrun/common/error.hpp"
#include "hyrun/link/link_seal.hpp"
#include "hyrun/link/link_tree.hpp"
#include "link_pump.hpp"
#include "listen_backlog.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <random>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace hyrun {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kToken = "0123456789abcdef0123456789abcdef";
// The silence limit of these links (hyrun's default, --node-timeout, is far longer).
constexpr std::chrono::milliseconds kLimit{1000};

struct Loss {
  std::string host, why;
};

using test_support::pump;

struct Pair {
  NodeLink root = NodeLink::listen(kLimit);
  std::optional<Loss> root_loss, node_loss;
  std::optional<NodeLink> node;
  explicit Pair(const std::string& node_token = kToken) {
    root.expect({"n1", "n2"}, 0, kToken);
    root.on_loss([this](const NodeLink::Loss& l) { return root_loss = Loss{l.host, l.why}, false; });
    node.emplace(NodeLink::connect("127.0.0.1", root.port(), 1, "n1", node_token, kLimit));
    node->on_loss([this](const NodeLink::Loss& l) { return node_loss = Loss{l.host, l.why}, false; });
  }
  // Runs both ends' loops for `d` (the hello, then heartbeats) and lets neither stop early.
  void run_both_for(std::chrono::milliseconds d) {
    pump(
        {&root, &*node}, [] { return false; }, d);
  }
  // The node's hyrun dies (the kernel closes its socket); true once the root saw a loss.
  bool drop_node_until_root_loses_it() {
    node.reset();
    return pump({&root}, [&] { return root_loss.has_value(); });
  }
};

TEST(NodeLink, LinkedNodesStayQuietWhileTheyHeartbeat) {
  Pair pair;
  const auto end = Clock::now() + std::chrono::milliseconds(1500);  // past the 1 s silence limit
  pump({&pair.root, &*pair.node}, [&] { return Clock::now() >= end; });
  EXPECT_FALSE(pair.root_loss) << pair.root_loss->why;
  EXPECT_FALSE(pair.node_loss) << pair.node_loss->why;
}

// The node of `pair` dies: the root loses it by name, as a closed connection.
void expect_dead_node_lost_as_closed(Pair& pair) {
  ASSERT_TRUE(pair.drop_node_until_root_loses_it());
  EXPECT_EQ(pair.root_loss->host, "n2");
  EXPECT_EQ(pair.root_loss->why, "connection closed");
}

// A hyrun whose loop was busy (a node reading hundreds of records on a loaded machine) must not
// take its own lateness for the peer's silence: the peer's heartbeats (sent by its writer's
// thread) wait in the socket, and the first tick after the pause reads them before judging.
// The tick is called first here, before any poll: the order that lost the peer.
TEST(NodeLink, AHyrunThatWasBusyReadsWhatItsPeerSentBeforeTakingItForSilent) {
  Pair pair;
  pair.run_both_for(std::chrono::milliseconds(300));
  std::this_thread::sleep_for(kLimit + std::chrono::milliseconds(500));  // neither loop runs
  pair.root.on_tick();
  pair.node->on_tick();
  EXPECT_FALSE(pair.root_loss) << pair.root_loss->host << ": " << pair.root_loss->why;
  EXPECT_FALSE(pair.node_loss) << pair.node_loss->host << ": " << pair.node_loss->why;
  expect_dead_node_lost_as_closed(pair);  // the link still works: the node's end is seen by name
}

TEST(NodeLink, ANodeThatClosesWithoutByeIsLostByName) {
  Pair pair;
  pair.run_both_for(std::chrono::milliseconds(300));
  expect_dead_node_lost_as_closed(pair);
}

TEST(NodeLink, ANodeThatDiesWithHeartbeatsUnreadIsLostAsClosed) {
  // Its socket holds the root's heartbeats, unread: the kernel resets the connection instead
  // of closing it (hybrid.ep-bench-node-lost once read "connection lost: Connection reset by
  // peer"). The loss reads the same either way.
  Pair pair;
  pair.run_both_for(std::chrono::milliseconds(300));
  std::this_thread::sleep_for(3 * NodeLink::heartbeat_for(kLimit));  // the root beats; the node reads nothing
  expect_dead_node_lost_as_closed(pair);
}

TEST(NodeLink, ANodeThatSaysByeIsNotLostAndTheRootStopsWaiting) {
  Pair pair;
  pair.run_both_for(std::chrono::milliseconds(300));
  pair.node->say_bye();
  pair.node.reset();
  SignalEvents signals{SIGUSR2};
  EXPECT_TRUE(pair.root.await_byes(signals));
  EXPECT_FALSE(pair.root_loss);
}

TEST(NodeLink, ANodeThatEndsBeforeTheRootAcceptsItIsNotLost) {
  // A short job: the node's hello and bye both wait in the root's backlog, read at once.
  Pair pair;
  pair.node->say_bye();
  pair.node.reset();
  SignalEvents signals{SIGUSR2};
  EXPECT_TRUE(pair.root.await_byes(signals)) << pair.root_loss->why;
  EXPECT_FALSE(pair.root_loss);
}

TEST(NodeLink, ABusyNodeIsNotLost) {
  // The node's loop does not run for three silence limits (starting many ranks, a flood of
  // output): its heartbeats go out from their own thread, and the root hears them (issue 20).
  Pair pair;
  pair.run_both_for(std::chrono::milliseconds(300));
  const auto end = Clock::now() + 3 * kLimit;
  pump(
      {&pair.root}, [&] { return pair.root_loss.has_value() || Clock::now() >= end; }, 4 * kLimit);
  EXPECT_FALSE(pair.root_loss) << pair.root_loss->why;
  // And the busy node, back in its loop, has lost nothing either: the root beat all along.
  pair.run_both_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(pair.node_loss) << pair.node_loss->why;
}

TEST(NodeLink, ANodeThatReadsNothingPastTheQueuesBoundIsLostNotSkipped) {
  // The node's main loop reads nothing (its heartbeat thread still beats, so it is not
  // silent) while the root sends it more than its queue may hold: the root loses it, named
  // and with why. Before, each message past the bound was dropped without a word, and a fence
  // would have waited for ever for a node that never got its part.
  NodeLink root = NodeLink::listen(kLimit, std::size_t{1} << 20);
  root.expect({"n1", "n2"}, 0, kToken);
  std::optional<Loss> loss;
  root.on_loss([&](const NodeLink::Loss& l) { return loss = Loss{l.host, l.why}, false; });
  std::optional<NodeLink> node(NodeLink::connect("127.0.0.1", root.port(), 1, "n1", kToken, kLimit));
  pump(
      {&root, &*node}, [] { return false; }, std::chrono::milliseconds(300));
  ASSERT_FALSE(loss) << loss->why;
  const std::string body = "fenced 0 " + std::string(64 * 1024, 'f');
  for (int i = 0; i < 256 && !loss; ++i) {  // 16 MiB: past any socket's buffers and the 1 MiB bound
    root.send_to(1, body);
    pump(
        {&root}, [] { return false; }, std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(pump({&root}, [&] { return loss.has_value(); }));
  EXPECT_EQ(loss->host, "n2");
  EXPECT_EQ(loss->why, "it took none of the 1 MiB queued for it on the node link: its hyrun reads nothing");
}

// Task 1's hyrun in a process of its own, so that a test can stop it (SIGSTOP) as a node off
// the network: it links to the root whose port the test sends it, then runs its loop.
// Made before the root starts its writer thread (forked_node.hpp).
test_support::ForkedNode node_linking_to_the_root(std::chrono::milliseconds limit) {
  return test_support::ForkedNode([limit](test_support::ForkedNode& self) {
    const std::vector<int> port = self.wait_words();
    NodeLink node = NodeLink::connect("127.0.0.1", port.at(0), 1, "n1", kToken, limit);
    pump(
        {&node}, [] { return false; }, std::chrono::seconds(60));
  });
}

// A root, and task 1's hyrun forked (node_linking_to_the_root) and linking to it.
struct RootAndForkedNode {
  test_support::ForkedNode child;  // first: forked before the root's writer thread starts
  NodeLink root;
  std::optional<Loss> loss;
  explicit RootAndForkedNode(std::chrono::milliseconds limit)
      : child(node_linking_to_the_root(limit)), root(NodeLink::listen(limit)) {
    root.expect({"n1", "n2"}, 0, kToken);
    root.on_loss([this](const NodeLink::Loss& l) { return loss = Loss{l.host, l.why}, false; });
    child.send_words({root.port()});
  }
};

TEST(NodeLink, ASilentNodeIsLostAfterTheSilenceLimit) {
  // The node's hyrun is a process of its own, linked, then stopped (SIGSTOP): nothing of it
  // runs, as when its node is off the network. The root loses it by name after the limit.
  // The node is forked before the root starts its writer thread (forked_node.hpp).
  RootAndForkedNode pair(kLimit);
  auto& [child, root, loss] = pair;
  // Its hello first: a node that never came would be lost too, for another reason.
  ASSERT_TRUE(pump({&root}, [&] { return root.bytes_received() > 0; }));
  pump(
      {&root}, [] { return false; }, std::chrono::milliseconds(500));
  ASSERT_FALSE(loss) << loss->why;
  ASSERT_EQ(::kill(child.pid(), SIGSTOP), 0);
  ASSERT_TRUE(pump({&root}, [&] { return loss.has_value(); }));
  EXPECT_EQ(loss->host, "n2");
  EXPECT_EQ(loss->why, "silent for 1 s (--node-timeout): its node is off the network or its hyrun is stopped");
}

// The root looks at its nodes' limits only when the earliest of them comes (a wake of the
// root costs what is ready, not the number of nodes). A loop that sleeps until the link's
// wake_by(), as hyrun's does, must never be told to sleep past a silent node's limit: the
// last bytes the root read from it, plus the limit. Checked at every wake, so that the
// machine's load cannot hide a late wake nor fake one.
TEST(NodeLink, ALoopThatSleepsUntilTheLinksWakeIsWokenByASilentNodesLimit) {
  constexpr std::chrono::milliseconds limit{3000};
  RootAndForkedNode pair(limit);
  auto& [child, root, loss] = pair;
  ASSERT_TRUE(test_support::pump_as_hyrun(
      {&root}, [&] { return root.bytes_received() > 0; }, 2 * limit));
  // Past a few of its heartbeats: the root's next look at the node was set by one of them.
  test_support::pump_as_hyrun(
      {&root}, [] { return false; }, std::chrono::milliseconds(1500));
  ASSERT_FALSE(loss) << loss->why;
  ASSERT_EQ(::kill(child.pid(), SIGSTOP), 0);
  auto received = root.bytes_received();
  auto last_read = Clock::now();  // a read sets the node's last word no later than this
  int late_wakes = 0;
  ASSERT_TRUE(test_support::pump_as_hyrun(
      {&root},
      [&] {
        if (root.bytes_received() != received) received = root.bytes_received(), last_read = Clock::now();
        if (!loss && root.wake_by() > last_read + limit) ++late_wakes;
        return loss.has_value();
      },
      4 * limit));
  EXPECT_EQ(loss->why, "silent for 3 s (--node-timeout): its node is off the network or its hyrun is stopped");
  EXPECT_EQ(late_wakes, 0) << "times the loop was told to sleep past the silent node's limit";
}

// A queue that passes its bound outside the loop's tick (a fence's data sent to a node that
// reads nothing) is judged at the loop's next wake, not when the link would next look at its
// nodes' limits anyway (a silence limit later).
TEST(NodeLink, AQueuePastItsBoundWakesTheLoopAtOnce) {
  constexpr std::chrono::milliseconds limit{20000};
  NodeLink root = NodeLink::listen(limit, std::size_t{1} << 20);
  root.expect({"n1", "n2"}, 0, kToken);
  std::optional<Loss> loss;
  root.on_loss([&](const NodeLink::Loss& l) { return loss = Loss{l.host, l.why}, false; });
  std::optional<NodeLink> node(NodeLink::connect("127.0.0.1", root.port(), 1, "n1", kToken, limit));
  ASSERT_TRUE(test_support::pump_as_hyrun(
      {&root, &*node}, [&] { return root.bytes_received() > 0; }, limit));
  test_support::pump_as_hyrun(
      {&root, &*node}, [] { return false; }, std::chrono::milliseconds(200));
  ASSERT_FALSE(loss) << loss->why;
  const std::string body = "fenced 0 " + std::string(64 * 1024, 'f');
  for (int i = 0; i < 256; ++i) root.send_to(1, body);  // 16 MiB: past the sockets' buffers and the bound
  EXPECT_LE(root.wake_by(), Clock::now()) << "the loop would sleep with a loss due";
  ASSERT_TRUE(test_support::pump_as_hyrun(
      {&root}, [&] { return loss.has_value(); }, limit));
  EXPECT_EQ(loss->why, "it took none of the 1 MiB queued for it on the node link: its hyrun reads nothing");
}

TEST(NodeLink, TheRootIsLostByNameWhenItDies) {
  std::optional<Pair> pair(std::in_place);
  pump(
      {&pair->root, &*pair->node}, [] { return false; }, std::chrono::milliseconds(300));
  NodeLink node = std::move(*pair->node);
  std::optional<Loss> loss;
  node.on_loss([&](const NodeLink::Loss& l) { return loss = Loss{l.host, l.why}, false; });
  pair.reset();  // the root's hyrun is gone
  ASSERT_TRUE(pump({&node}, [&] { return loss.has_value(); }));
  EXPECT_EQ(loss->host, "n1");
  EXPECT_EQ(loss->why, "connection closed");
}

TEST(NodeLink, ALossTheJobGoesOnWithoutIsRelayedToTheOtherNodesAndNotAwaited) {
  // Three nodes; the third's hyrun dies and the root's handler absorbs it (an elastic job).
  NodeLink root = NodeLink::listen(kLimit);
  root.expect({"n1", "n2", "n3"}, 0, kToken);
  std::vector<NodeLink::Loss> root_losses, relayed;
  root.on_loss([&](const NodeLink::Loss& l) { return root_losses.push_back(l), true; });
  NodeLink second = NodeLink::connect("127.0.0.1", root.port(), 1, "n1", kToken, kLimit);
  second.on_loss([&](const NodeLink::Loss& l) { return relayed.push_back(l), true; });
  std::optional<NodeLink> third(NodeLink::connect("127.0.0.1", root.port(), 2, "n1", kToken, kLimit));
  pump(
      {&root, &second, &*third}, [] { return false; }, std::chrono::milliseconds(300));
  third.reset();
  ASSERT_TRUE(pump({&root, &second}, [&] { return !relayed.empty(); }));
  ASSERT_EQ(root_losses.size(), 1u);
  EXPECT_EQ(root_losses[0].task, 2);
  EXPECT_EQ(root_losses[0].host, "n3");
  EXPECT_FALSE(root_losses[0].relayed);
  ASSERT_EQ(relayed.size(), 1u);
  EXPECT_EQ(relayed[0].task, 2);
  EXPECT_EQ(relayed[0].host, "n3");
  EXPECT_EQ(relayed[0].why, "connection closed");
  EXPECT_TRUE(relayed[0].relayed);
  EXPECT_FALSE(root.lost());
  EXPECT_FALSE(second.lost());
  // The root waits only for the node that is left.
  second.say_bye();
  SignalEvents signals{SIGUSR2};
  EXPECT_TRUE(root.await_byes(signals));
}

TEST(NodeLink, ALossTheHandlerDoesNotAbsorbIsNotRelayed) {
  NodeLink root = NodeLink::listen(kLimit);
  root.expect({"n1", "n2", "n3"}, 0, kToken);
  std::optional<NodeLink::Loss> root_loss, relayed;
  root.on_loss([&](const NodeLink::Loss& l) { return root_loss = l, false; });
  NodeLink second = NodeLink::connect("127.0.0.1", root.port(), 1, "n1", kToken, kLimit);
  second.on_loss([&](const NodeLink::Loss& l) { return relayed = l, false; });
  std::optional<NodeLink> third(NodeLink::connect("127.0.0.1", root.port(), 2, "n1", kToken, kLimit));
  pump(
      {&root, &second, &*third}, [] { return false; }, std::chrono::milliseconds(300));
  third.reset();
  ASSERT_TRUE(pump({&root, &second}, [&] { return root_loss.has_value(); }));
  pump(
      {&root, &second}, [] { return false; }, std::chrono::milliseconds(300));
  EXPECT_TRUE(root.lost());
  EXPECT_FALSE(relayed) << relayed->why;
}

TEST(NodeLink, AConnectionWithoutTheJobTokenIsRefused) {
  Pair pair("ffffffffffffffffffffffffffffffff");
  // The root closes it: the impostor sees its link closed, the root reports no node.
  ASSERT_TRUE(pump({&pair.root, &*pair.node}, [&] { return pair.node_loss.has_value(); }));
  EXPECT_EQ(pair.node_loss->why, "connection closed");
  EXPECT_FALSE(pair.root_loss);
}

// A plain TCP connection to the root's port, as anyone on the network can open.
UniqueFd connect_raw(int port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

// True when the root closed `fd` (EOF now), false while it is open and silent.
bool closed_by_peer(int fd) {
  char c;
  return ::recv(fd, &c, 1, MSG_DONTWAIT) == 0;
}

using test_support::CapturedLog;

// True when `node`, linked to `root` as n2, is lost by name when it dies: the root had identified it.
bool linked(NodeLink& root, std::optional<NodeLink>& node, std::optional<Loss>& root_loss) {
  pump(
      {&root, &*node}, [] { return false; }, std::chrono::milliseconds(300));
  node.reset();
  return pump({&root}, [&] { return root_loss.has_value(); }) && root_loss->host == "n2" &&
         root_loss->why == "connection closed";
}

// A hyrun of the job as far as the hello goes (it holds the token), whose next line is not
// sealed: what someone who can write into the connection would inject.
TEST(NodeLink, AnUnsealedByeAfterTheHelloIsALossNotAGoodbye) {
  NodeLink root = NodeLink::listen(kLimit);
  root.expect({"n1", "n2"}, 0, kToken);
  std::optional<Loss> root_loss;
  root.on_loss([&](const NodeLink::Loss& l) { return root_loss = Loss{l.host, l.why}, false; });
  const UniqueFd fd = connect_raw(root.port());
  const std::string nonce = new_link_nonce();
  const std::string lines = fmt::format("{} 1 {} {}\nbye\n", kLinkHello, nonce, link_hello_proof(kToken, 1, 0, nonce));
  ASSERT_EQ(::send(fd.get(), lines.data(), lines.size(), MSG_NOSIGNAL), static_cast<ssize_t>(lines.size()));
  ASSERT_TRUE(pump({&root}, [&] { return root_loss.has_value(); })) << "the made-up bye was taken as the node's";
  EXPECT_EQ(root_loss->host, "n2");
  EXPECT_NE(root_loss->why.find("fails the node link's authentication"), std::string::npos) << root_loss->why;
}

// The node's side: a made-up "lost" line from where the root is (no seal of this session)
// is not a relayed loss of another node; it ends the link to the root.
TEST(NodeLink, AnUnsealedLossFromTheRootsAddressIsNotRelayed) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const UniqueFd owner(listener);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t length = sizeof a;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &length);
  std::optional<NodeLink> node(NodeLink::connect("127.0.0.1", ntohs(a.sin_port), 1, "n1", kToken, kLimit));
  std::vector<NodeLink::Loss> losses;
  node->on_loss([&](const NodeLink::Loss& l) { return losses.push_back(l), true; });
  const UniqueFd fake_root(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(fake_root);
  const std::string line = "lost 2 0 n2 connection closed\n";
  ASSERT_EQ(::send(fake_root.get(), line.data(), line.size(), MSG_NOSIGNAL), static_cast<ssize_t>(line.size()));
  ASSERT_TRUE(pump({&*node}, [&] { return !losses.empty(); }));
  ASSERT_EQ(losses.size(), 1u);
  EXPECT_FALSE(losses[0].relayed) << "a made-up loss of node 2 was relayed";
  EXPECT_EQ(losses[0].task, 0);
  EXPECT_NE(losses[0].why.find("fails the node link's authentication"), std::string::npos) << losses[0].why;
}

TEST(NodeLink, IdleConnectionsAreCappedAndARealNodeStillLinks) {
  CapturedLog log;
  NodeLink root = NodeLink::listen(kLimit);
  root.expect({"n1", "n2"}, 0, kToken);
  std::optional<Loss> root_loss;
  root.on_loss([&](const NodeLink::Loss& l) { return root_loss = Loss{l.host, l.why}, false; });
  std::vector<UniqueFd> idle;
  for (int i = 0; i < 100; ++i) idle.push_back(connect_raw(root.port()));
  pump(
      {&root}, [] { return false; }, std::chrono::milliseconds(300));  // under the 1 s hello limit
  const auto closed =
      std::count_if(idle.begin(), idle.end(), [](const UniqueFd& f) { return closed_by_peer(f.get()); });
  EXPECT_GE(closed, 100 - 64 - 1) << "at most 64 connections beyond the job's one other node wait for their hello";
  EXPECT_LE(log.warnings(), 11) << "the connections closed at the cap are not warned of one by one";
  std::optional<NodeLink> node(NodeLink::connect("127.0.0.1", root.port(), 1, "n1", kToken, kLimit));
  EXPECT_TRUE(linked(root, node, root_loss)) << (root_loss ? root_loss->why : "no loss");
}

TEST(NodeLink, RefusalWarningsAreBounded) {
  CapturedLog log;
  NodeLink root = NodeLink::listen(kLimit);
  root.expect({"n1", "n2"}, 0, kToken);
  std::vector<UniqueFd> refused;
  for (int i = 0; i < 50; ++i) {
    refused.push_back(connect_raw(root.port()));
    ASSERT_EQ(::send(refused.back().get(), "hyrun-link v1 1 00\n", 19, MSG_NOSIGNAL), 19);
  }
  ASSERT_TRUE(pump({&root}, [&] {
    return std::all_of(refused.begin(), refused.end(), [](const UniqueFd& f) { return closed_by_peer(f.get()); });
  }));
  const int warnings = log.warnings();
  EXPECT_GE(warnings, 1);
  EXPECT_LE(warnings, 11) << "50 refusals: the first 10 one by one, then at most a summary";
}

// docs/security.md, the node link: an unidentified connection is closed when it has sent no
// hello "within --node-timeout of the accept, however it trickles bytes" (here the test's, 1 s):
// each byte it sends does not restart its deadline.
TEST(NodeLink, ATricklingConnectionIsClosedAtTheHelloDeadlineFromItsAccept) {
  NodeLink root = NodeLink::listen(kLimit);
  root.expect({"n1", "n2"}, 0, kToken);
  const UniqueFd trickler = connect_raw(root.port());
  const std::string hello_start = "hyrun-link v1 1 ";
  bool closed = false;
  // One byte every 100 ms, never a whole line, for up to 5 times the limit.
  for (std::size_t i = 0; i < 50 && !closed; ++i) {
    closed = ::send(trickler.get(), &hello_start[i % hello_start.size()], 1, MSG_NOSIGNAL) != 1;
    pump(
        {&root}, [] { return false; }, std::chrono::milliseconds(100));
    closed = closed || closed_by_peer(trickler.get());
  }
  EXPECT_TRUE(closed) << "a connection trickling a byte per 100 ms was kept for 5 s (its hello limit is 1 s)";
}

// The hello a node of this job sends for `task` (link_seal.hpp: a fresh nonce, its proof).
std::string hello_for(int task) {
  const std::string nonce = new_link_nonce();
  return fmt::format("{} {} {} {}\n", kLinkHello, task, nonce, link_hello_proof(kToken, task, 0, nonce));
}

// docs/security.md: "A captured hello replayed is refused (its node is already connected)",
// and the node that is linked stays linked.
TEST(NodeLink, AReplayedHelloIsRefusedAndTheLinkedNodeKeepsItsLink) {
  CapturedLog log;
  Pair pair;
  pair.run_both_for(std::chrono::milliseconds(300));
  const UniqueFd replay = connect_raw(pair.root.port());
  const std::string hello = hello_for(1);
  ASSERT_EQ(::send(replay.get(), hello.data(), hello.size(), MSG_NOSIGNAL), static_cast<ssize_t>(hello.size()));
  ASSERT_TRUE(pump({&pair.root, &*pair.node}, [&] { return closed_by_peer(replay.get()); }))
      << "the replayed hello was not refused";
  const auto lines = log.lines();
  EXPECT_TRUE(std::any_of(lines.begin(), lines.end(), [](const std::string& l) {
    return l.find("a second connection for task 1 was refused") != std::string::npos;
  }));
  EXPECT_FALSE(pair.root_loss) << pair.root_loss->why;
  EXPECT_FALSE(pair.node_loss) << pair.node_loss->why;
  // The genuine node is still the one linked: its end is seen by name.
  ASSERT_TRUE(pair.drop_node_until_root_loses_it());
  EXPECT_EQ(pair.root_loss->host, "n2");
}

// docs/security.md: "at most 64 such connections are kept at once: beyond, the oldest still
// without a hello is closed (after the hellos that came are read)". A node's hello waits in the
// oldest connection of all when 70 idle ones follow it: it is read and the node linked, and the
// 6 oldest idle connections are the ones closed.
// True when the root closed `fd`: EOF, or a reset (a close with our bytes unread resets).
bool ended_by_peer(int fd) {
  char c;
  const ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

// A root of a two-node job that records its loss, for tests that play the node by hand.
struct ListeningRoot {
  NodeLink root = NodeLink::listen(kLimit);
  std::optional<Loss> loss;
  ListeningRoot() {
    root.expect({"n1", "n2"}, 0, kToken);
    root.on_loss([this](const NodeLink::Loss& l) { return loss = Loss{l.host, l.why}, false; });
  }
};

TEST(NodeLink, AtTheCapTheOldestIdleConnectionsCloseAfterTheHellosThatCameAreRead) {
  ListeningRoot r;
  NodeLink& root = r.root;
  std::optional<Loss>& root_loss = r.loss;
  std::optional<UniqueFd> node(connect_raw(root.port()));
  const std::string hello = hello_for(1);
  ASSERT_EQ(::send(node->get(), hello.data(), hello.size(), MSG_NOSIGNAL), static_cast<ssize_t>(hello.size()));
  std::vector<UniqueFd> idle;
  for (int i = 0; i < 70; ++i) idle.push_back(connect_raw(root.port()));
  pump(
      {&root}, [] { return false; }, std::chrono::milliseconds(300));  // under the 1 s hello limit
  EXPECT_FALSE(ended_by_peer(node->get())) << "the node's hello was not read before its connection was closed";
  // 64 beyond the job's one other node may wait: the oldest 5 of 70 go.
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(closed_by_peer(idle[i].get())) << "idle connection " << i;
  for (int i = 5; i < 70; ++i) EXPECT_FALSE(closed_by_peer(idle[i].get())) << "idle connection " << i;
  node.reset();  // the node was linked: its end is a loss by name
  ASSERT_TRUE(pump({&root}, [&] { return root_loss.has_value(); }));
  EXPECT_EQ(root_loss->host, "n2");
  EXPECT_EQ(root_loss->why, "connection closed");
}

// As AHyrunThatWasBusyReads...BeforeTakingItForSilent, for a hello: a node that connected and
// said its hello at once is not closed because the root's loop came to it after the hello
// limit (a root busy reading hundreds of nodes' records on a loaded machine).
TEST(NodeLink, AHelloSentInTimeIsReadThoughTheRootComesToItLate) {
  ListeningRoot r;
  NodeLink& root = r.root;
  std::optional<Loss>& root_loss = r.loss;
  std::optional<UniqueFd> node(connect_raw(root.port()));
  pump(
      {&root}, [] { return false; }, std::chrono::milliseconds(100));  // accepted: its hello clock runs
  const std::string hello = hello_for(1);
  ASSERT_EQ(::send(node->get(), hello.data(), hello.size(), MSG_NOSIGNAL), static_cast<ssize_t>(hello.size()));
  std::this_thread::sleep_for(kLimit + std::chrono::milliseconds(200));  // past the hello limit, the loop away
  root.on_tick();
  EXPECT_FALSE(ended_by_peer(node->get())) << "the root closed a node whose hello waited unread";
  node.reset();  // it was linked: its end is a loss by name
  ASSERT_TRUE(pump({&root}, [&] { return root_loss.has_value(); }));
  EXPECT_EQ(root_loss->host, "n2");
}

// A node whose loop is busy once it dialled (starting its ranks: 11 s in one node of 512 x 4
// simulated nodes on 2 cores) still says its hello on time: the writer's thread sends it as
// the connect completes. Here the node's parent in the tree is task 1, so its connection to the
// root carries no heartbeats, and the limit is the default --node-timeout (30 s: a hello
// within 5 s). Before, the hello waited for the node's loop, and the root closed the
// connection at the hello limit: the node then lost the root ("cannot connect: Broken pipe").
TEST(NodeLink, ANodeBusyAfterItDialledSaysItsHelloOnTime) {
  constexpr std::chrono::seconds kDefaultLimit{30};
  const LinkTree tree(1, 3);  // 0 <- 1 <- 2
  NodeLink root = NodeLink::listen(kDefaultLimit);
  root.expect({"n0", "n1", "n2"}, 0, kToken, tree);
  NodeLink node = NodeLink::unlistened(2, kToken, tree, kDefaultLimit);
  std::optional<Loss> node_loss;
  node.on_loss([&](const NodeLink::Loss& l) { return node_loss = Loss{l.host, l.why}, false; });
  node.dial(0, "n0", "127.0.0.1", root.port());
  pump(
      {&root}, [] { return false; }, std::chrono::milliseconds(5500));  // past the 5 s hello limit
  ASSERT_GT(root.bytes_received(), 0U) << "the root has no hello from the node";
  pump(
      {&root, &node}, [] { return false; }, std::chrono::milliseconds(300));
  EXPECT_FALSE(node_loss) << node_loss->why;
}

// A busy node's hello may come seconds after its connect (a thread that waits for a core on a
// loaded machine): the root takes it within --node-timeout, not at a fixed 5 s, which closed
// half the late nodes of 512 x 4 simulated ones on 2 cores.
TEST(NodeLink, AHelloLaterThanFiveSecondsIsTakenWithinTheNodeTimeout) {
  constexpr std::chrono::seconds kDefaultLimit{30};
  NodeLink root = NodeLink::listen(kDefaultLimit);
  root.expect({"n0", "n1"}, 0, kToken);
  std::optional<Loss> root_loss;
  root.on_loss([&](const NodeLink::Loss& l) { return root_loss = Loss{l.host, l.why}, false; });
  const UniqueFd late = connect_raw(root.port());
  pump(
      {&root}, [] { return false; }, std::chrono::milliseconds(5500));
  ASSERT_FALSE(ended_by_peer(late.get())) << "the root closed the connection before the node's hello";
  const std::string hello = hello_for(1);
  ASSERT_EQ(::send(late.get(), hello.data(), hello.size(), MSG_NOSIGNAL), static_cast<ssize_t>(hello.size()));
  const UniqueFd second = connect_raw(root.port());  // the same hello again: refused once the first was taken
  ASSERT_EQ(::send(second.get(), hello.data(), hello.size(), MSG_NOSIGNAL), static_cast<ssize_t>(hello.size()));
  ASSERT_TRUE(pump({&root}, [&] { return closed_by_peer(second.get()); })) << "the second connection was kept";
  EXPECT_FALSE(ended_by_peer(late.get())) << "the node's late hello was refused";
  EXPECT_FALSE(root_loss) << root_loss->host << ": " << root_loss->why;
}

// Every node of a large job connects at once after the fence; those whose hello comes late
// (a busy node) must not be closed for the cap on connections that wait for their hello.
TEST(NodeLink, EveryNodeOfALargeJobLinksThoughAllConnectAtOnceAndTheirHellosAreLate) {
  constexpr int kNodes = 121;  // 120 connections at once: within the backlog hyrun had before
  std::vector<std::string> hosts;
  for (int t = 0; t < kNodes; ++t) hosts.push_back(fmt::format("n{}", t + 1));
  NodeLink root = NodeLink::listen(kLimit);
  root.expect(hosts, 0, kToken);
  std::optional<Loss> root_loss;
  root.on_loss([&](const NodeLink::Loss& l) { return root_loss = Loss{l.host, l.why}, false; });
  std::vector<UniqueFd> nodes;
  for (int t = 1; t < kNodes; ++t) nodes.push_back(connect_raw(root.port()));
  pump(
      {&root}, [] { return false; }, std::chrono::milliseconds(200));  // every one accepted, no hello yet
  for (int t = 1; t < kNodes; ++t) {
    const std::string hello = hello_for(t);
    ASSERT_EQ(::send(nodes[t - 1].get(), hello.data(), hello.size(), MSG_NOSIGNAL), static_cast<ssize_t>(hello.size()));
  }
  pump(
      {&root}, [] { return false; }, std::chrono::milliseconds(300));  // under the 1 s hello limit
  const auto closed =
      std::count_if(nodes.begin(), nodes.end(), [](const UniqueFd& f) { return ended_by_peer(f.get()); });
  EXPECT_EQ(closed, 0) << "nodes of the job closed before their hello was read";
  EXPECT_FALSE(root_loss) << root_loss->host << ": " << root_loss->why;
}

// The root holds a connection to every node: its loop polls one descriptor for them all (an
// epoll set), so that a wake costs what is ready, not the job's size; a line from each node,
// and the root's broadcast to each, still arrive.
TEST(NodeLink, TheRootPollsOneDescriptorForEveryNodeAndHearsEach) {
  constexpr int kNodes = 41;
  std::vector<std::string> hosts;
  for (int t = 0; t < kNodes; ++t) hosts.push_back(fmt::format("n{}", t + 1));
  NodeLink root = NodeLink::listen(kLimit);
  root.expect(hosts, 0, kToken);
  root.on_loss([](const NodeLink::Loss&) { return false; });
  std::vector<int> from_nodes;
  root.on(LinkKind::kDmodexNone, [&](int task, std::string_view body) {
    const auto none = parse_link<LinkDmodexNone>(body);
    return none && none->id == static_cast<std::uint64_t>(task) && (from_nodes.push_back(task), true);
  });
  std::vector<NodeLink> nodes;
  std::vector<int> to_nodes;
  for (int t = 1; t < kNodes; ++t) {
    nodes.push_back(NodeLink::connect("127.0.0.1", root.port(), t, hosts[0], kToken, kLimit));
    nodes.back().on(LinkKind::kDmodexNone, [&to_nodes, t](int from, std::string_view body) {
      const auto none = parse_link<LinkDmodexNone>(body);
      return none && from == 0 && none->id == 99 && (to_nodes.push_back(t), true);
    });
    nodes.back().send_to(0, format_link(LinkDmodexNone{static_cast<std::uint64_t>(t)}));  // goes once connected
  }
  std::vector<NodeLink*> all{&root};
  for (auto& n : nodes) all.push_back(&n);
  ASSERT_TRUE(pump(all, [&] { return from_nodes.size() == kNodes - 1; }));
  std::vector<pollfd> fds;
  root.add_poll_fds(fds);
  EXPECT_EQ(fds.size(), 1U) << "descriptors the root's loop polls with " << kNodes - 1 << " nodes linked";
  root.broadcast(format_link(LinkDmodexNone{99}));
  ASSERT_TRUE(pump(all, [&] { return to_nodes.size() == kNodes - 1; }));
  std::sort(from_nodes.begin(), from_nodes.end());
  std::sort(to_nodes.begin(), to_nodes.end());
  std::vector<int> every(kNodes - 1);
  std::iota(every.begin(), every.end(), 1);
  EXPECT_EQ(from_nodes, every);
  EXPECT_EQ(to_nodes, every);
}

// The kernel's longest backlog (SOMAXCONN), as ss reports it for the root's port: every node
// of a large job connects at once, and one past the backlog waits for a SYN retransmission.
TEST(NodeLink, TheRootsBacklogIsTheKernelsLongest) {
  ASSERT_GT(test_support::kernel_somaxconn(), 0);
  NodeLink root = NodeLink::listen(kLimit);
  const auto backlog = test_support::listen_backlog(root.port());
  if (!backlog) GTEST_SKIP() << "ss (iproute2) is not installed or lists nothing";
  EXPECT_EQ(*backlog, test_support::kernel_somaxconn());
}

// CPU seconds this process used so far (every thread).
double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// The child's side of the test below: the root's loop for 1 s with no descriptor left for
// accept. Returns the CPU milliseconds it took, negative when the root did not link a node
// once descriptors were free again.
int root_out_of_descriptors() {
  NodeLink root = NodeLink::listen(std::chrono::seconds(5));
  root.expect({"n1", "n2"}, 0, kToken);
  std::optional<Loss> root_loss;
  root.on_loss([&](const NodeLink::Loss& l) { return root_loss = Loss{l.host, l.why}, false; });
  std::vector<UniqueFd> pending;
  for (int i = 0; i < 4; ++i) pending.push_back(connect_raw(root.port()));  // in the listener's backlog
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = 64;
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) return -2;
  std::vector<UniqueFd> filler;  // every descriptor under the limit taken: accept4 fails with EMFILE
  for (UniqueFd f(::open("/dev/null", O_RDONLY | O_CLOEXEC)); f;
       f = UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC)))
    filler.push_back(std::move(f));
  const double start = cpu_seconds();
  pump(
      {&root}, [] { return false; }, std::chrono::seconds(1));
  const double used = cpu_seconds() - start;
  filler.clear();
  std::optional<NodeLink> node(NodeLink::connect("127.0.0.1", root.port(), 1, "n1", kToken, std::chrono::seconds(5)));
  if (!linked(root, node, root_loss)) return -1;
  return static_cast<int>(used * 1000);
}

TEST(NodeLink, OutOfDescriptorsTheRootNeitherSpinsNorStopsAccepting) {
#ifdef __SANITIZE_ADDRESS__
  // The sanitizers' runtime needs descriptors of its own (it reported a false vptr error in
  // the starved child): this test runs in the plain build only.
  GTEST_SKIP() << "starves the process of descriptors, which the sanitizer runtime needs";
#endif
  int result[2];
  ASSERT_EQ(::pipe(result), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int ms = root_out_of_descriptors();
    ::_exit(::write(result[1], &ms, sizeof ms) == sizeof ms ? 0 : 1);
  }
  ::close(result[1]);
  int ms = -3;
  pollfd p{result[0], POLLIN, 0};
  if (::poll(&p, 1, 20000) > 0 && ::read(result[0], &ms, sizeof ms) != sizeof ms) ms = -3;
  ::close(result[0]);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ASSERT_GE(ms, 0) << "-1: no node linked once descriptors were free; -2: setrlimit failed; -3: no answer in 20 s";
  EXPECT_LT(ms, 100) << "CPU milliseconds in 1 s of the root's loop while accept4 fails with EMFILE";
}

}  // namespace
}  // namespace hyrun

namespace hyrun {
namespace {

// A PMIx fence's data of every node travels as one sealed line of megabytes, both ways, whole
// (the node link's hello-sized line limit applies only before a peer is identified), to the
// handler registered for its kind.
TEST(NodeLink, LongSealedLinesArriveWholeBothWays) {
  Pair pair;
  std::mt19937 random(3);
  // The longest lines: a piece of bytes each (link_message.hpp); longer data goes in pieces.
  std::string up(kLinkPieceBytes - 1, '\0'), down(kLinkPieceBytes, '\0');
  for (auto* s : {&up, &down})
    for (auto& c : *s) c = static_cast<char>(random());
  std::vector<std::pair<int, std::string>> at_root, at_node;
  pair.root.on(LinkKind::kFence, [&](int task, std::string_view body) {
    const auto part = parse_link<LinkFencePart>(body);
    return part && (at_root.emplace_back(task, part->data), true);
  });
  pair.node->on(LinkKind::kFenced, [&](int task, std::string_view body) {
    const auto whole = parse_link<LinkFenceWhole>(body);
    return whole && (at_node.emplace_back(task, whole->data), true);
  });
  pair.node->send_to(0, format_link(LinkFencePart{0, up}));
  ASSERT_TRUE(pump({&pair.root, &*pair.node}, [&] { return !at_root.empty(); }));
  pair.root.broadcast(format_link(LinkFenceWhole{0, down}));
  ASSERT_TRUE(pump({&pair.root, &*pair.node}, [&] { return !at_node.empty(); }));
  ASSERT_EQ(at_root.size(), 1u);
  EXPECT_EQ(at_root[0].first, 1);
  EXPECT_TRUE(at_root[0].second == up);
  ASSERT_EQ(at_node.size(), 1u);
  EXPECT_EQ(at_node[0].first, 0);
  EXPECT_TRUE(at_node[0].second == down);
  EXPECT_FALSE(pair.root_loss);
  EXPECT_FALSE(pair.node_loss);
}

// A line of a kind no one here takes, or that is not exactly its kind, ends the link.
TEST(NodeLink, ALineNoHandlerTakesEndsTheLink) {
  for (const std::string& line : {std::string("dmodex-none 3"), std::string("fence 1 0g")}) {
    Pair pair;
    pair.root.on(LinkKind::kFence,
                 [](int, std::string_view body) { return parse_link<LinkFencePart>(body).has_value(); });
    pair.node->send_to(0, format_link(LinkFencePart{0, "known"}));
    pair.run_both_for(std::chrono::milliseconds(200));
    EXPECT_FALSE(pair.root_loss) << line;
    pair.node->send_to(0, line);
    ASSERT_TRUE(pump({&pair.root, &*pair.node}, [&] { return pair.root_loss.has_value(); })) << line;
    EXPECT_EQ(pair.root_loss->why, fmt::format("it sent '{}', of a kind ({}) that this hyrun does not take from it",
                                               line, line.substr(0, line.find(' '))));
  }
}

// A kind that protocol v2 does not have is named as such, whatever the handlers.
TEST(NodeLink, ALineOfAKindTheProtocolDoesNotHaveEndsTheLinkNamingTheVersion) {
  Pair pair;
  pair.run_both_for(std::chrono::milliseconds(100));
  pair.node->send_to(0, "status 1 2");
  ASSERT_TRUE(pump({&pair.root, &*pair.node}, [&] { return pair.root_loss.has_value(); }));
  EXPECT_EQ(pair.root_loss->why,
            "it sent a line of a kind that the node link's protocol (hyrun-link v7) does not have ('status 1 2')");
}

// The link takes alive, bye and lost itself: no one else may register for them.
TEST(NodeLink, TheLinksOwnKindsTakeNoHandler) {
  NodeLink root = NodeLink::listen(kLimit);
  for (const LinkKind kind : {LinkKind::kAlive, LinkKind::kBye, LinkKind::kLost, LinkKind::kEnded})
    EXPECT_THROW(root.on(kind, [](int, std::string_view) { return true; }), Error);
  EXPECT_NO_THROW(root.on(LinkKind::kDmodexGet, [](int, std::string_view) { return true; }));
}

// From the root, a broadcast reaches every node still linked, and none that said bye.
TEST(NodeLink, ABroadcastReachesEveryLinkedNodeButOneThatSaidBye) {
  NodeLink root = NodeLink::listen(kLimit);
  root.expect({"n1", "n2", "n3", "n4"}, 0, kToken);
  root.on_loss([](const NodeLink::Loss&) { return false; });
  std::vector<NodeLink> nodes;
  std::vector<std::vector<std::uint64_t>> heard(3);
  for (int t = 1; t <= 3; ++t) {
    nodes.push_back(NodeLink::connect("127.0.0.1", root.port(), t, "n1", kToken, kLimit));
    nodes.back().on(LinkKind::kDmodexNone, [&heard, t](int from, std::string_view body) {
      const auto none = parse_link<LinkDmodexNone>(body);
      return none && from == 0 && (heard[static_cast<std::size_t>(t - 1)].push_back(none->id), true);
    });
  }
  const auto all = [&] { return std::vector<NodeLink*>{&root, &nodes[0], &nodes[1], &nodes[2]}; };
  pump(
      all(), [] { return false; }, std::chrono::milliseconds(300));
  nodes[2].say_bye();
  pump(
      all(), [] { return false; }, std::chrono::milliseconds(200));
  root.broadcast(format_link(LinkDmodexNone{7}));
  ASSERT_TRUE(pump(all(), [&] { return heard[0].size() == 1 && heard[1].size() == 1; }));
  pump(
      all(), [] { return false; }, std::chrono::milliseconds(200));
  EXPECT_EQ(heard[0], std::vector<std::uint64_t>{7});
  EXPECT_EQ(heard[1], std::vector<std::uint64_t>{7});
  EXPECT_TRUE(heard[2].empty()) << "a node that said bye";
}

// A broadcast's lines are held once for every node's queue: pieces of bytes longer than a
// socket takes at once, with heartbeats queued between them, reach every node whole, in order.
TEST(NodeLink, ABroadcastOfPiecesReachesEveryNodeWholeAndInOrder) {
  NodeLink root = NodeLink::listen(kLimit);
  root.expect({"n1", "n2", "n3"}, 0, kToken);
  root.on_loss([](const NodeLink::Loss&) { return false; });
  std::mt19937 random(5);
  std::string data(3 * kLinkPieceBytes + 99, '\0');
  for (auto& c : data) c = static_cast<char>(random());
  std::vector<NodeLink> nodes;
  std::vector<std::string> pieces(2), wholes(2);
  std::vector<int> losses(2, 0);
  for (int t = 1; t <= 2; ++t) {
    nodes.push_back(NodeLink::connect("127.0.0.1", root.port(), t, "n1", kToken, kLimit));
    const auto i = static_cast<std::size_t>(t - 1);
    nodes.back().on(LinkKind::kMore, [&pieces, i](int, std::string_view body) {
      const auto more = parse_link<LinkMore>(body);
      return more && (pieces[i] += more->data, true);
    });
    nodes.back().on(LinkKind::kFenced, [&pieces, &wholes, i](int, std::string_view body) {
      const auto last = parse_link<LinkFenceWhole>(body);
      return last && last->number == 3 && (wholes[i] = std::exchange(pieces[i], {}) + last->data, true);
    });
    nodes.back().on_loss([&losses, i](const NodeLink::Loss&) { return ++losses[i], false; });
  }
  const auto all = [&] { return std::vector<NodeLink*>{&root, &nodes[0], &nodes[1]}; };
  pump(
      all(), [] { return false; }, std::chrono::milliseconds(200));
  for (auto& body : format_link_pieces(LinkFenceWhole{3, data})) root.broadcast(std::move(body));
  ASSERT_TRUE(pump(all(), [&] { return !wholes[0].empty() && !wholes[1].empty(); }));
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(wholes[i] == data) << "node " << i + 1 << " got " << wholes[i].size() << " of " << data.size();
    EXPECT_EQ(losses[i], 0);
  }
}

}  // namespace
}  // namespace hyrun
