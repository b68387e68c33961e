// The node link between two hyrun processes, played by two NodeLink objects over loopback:
// what hybrid mode relies on to tell a lost node from one that finished.
#include "hyrun/launcher/node_link.hpp"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <optional>
#include <string>
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

// Runs the loops of `links` (as the supervisor's loop would) until `done` or `limit`.
bool pump(const std::vector<NodeLink*>& links, const std::function<bool()>& done,
          std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  const auto end = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() >= end) return false;
    std::vector<pollfd> fds;
    for (auto* l : links) l->add_poll_fds(fds);
    ::poll(fds.data(), fds.size(), 20);
    for (const auto& p : fds)
      if (p.revents)
        for (auto* l : links)
          if (l->on_poll(p)) break;
    for (auto* l : links) l->on_tick();
  }
  return true;
}

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
};

TEST(NodeLink, LinkedNodesStayQuietWhileTheyHeartbeat) {
  Pair pair;
  const auto end = Clock::now() + std::chrono::milliseconds(1500);  // past the 1 s silence limit
  pump({&pair.root, &*pair.node}, [&] { return Clock::now() >= end; });
  EXPECT_FALSE(pair.root_loss) << pair.root_loss->why;
  EXPECT_FALSE(pair.node_loss) << pair.node_loss->why;
}

TEST(NodeLink, ANodeThatClosesWithoutByeIsLostByName) {
  Pair pair;
  pump(
      {&pair.root, &*pair.node}, [] { return false; }, std::chrono::milliseconds(300));
  pair.node.reset();  // its hyrun died: the kernel closes the socket
  ASSERT_TRUE(pump({&pair.root}, [&] { return pair.root_loss.has_value(); }));
  EXPECT_EQ(pair.root_loss->host, "n2");
  EXPECT_EQ(pair.root_loss->why, "connection closed");
}

TEST(NodeLink, ANodeThatSaysByeIsNotLostAndTheRootStopsWaiting) {
  Pair pair;
  pump(
      {&pair.root, &*pair.node}, [] { return false; }, std::chrono::milliseconds(300));
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
  pump(
      {&pair.root, &*pair.node}, [] { return false; }, std::chrono::milliseconds(300));
  const auto end = Clock::now() + 3 * kLimit;
  pump(
      {&pair.root}, [&] { return pair.root_loss.has_value() || Clock::now() >= end; }, 4 * kLimit);
  EXPECT_FALSE(pair.root_loss) << pair.root_loss->why;
  // And the busy node, back in its loop, has lost nothing either: the root beat all along.
  pump(
      {&pair.root, &*pair.node}, [] { return false; }, std::chrono::milliseconds(100));
  EXPECT_FALSE(pair.node_loss) << pair.node_loss->why;
}

TEST(NodeLink, ASilentNodeIsLostAfterTheSilenceLimit) {
  // The node's hyrun is a process of its own, linked, then stopped (SIGSTOP): nothing of it
  // runs, as when its node is off the network. The root loses it by name after the limit.
  NodeLink root = NodeLink::listen(kLimit);
  root.expect({"n1", "n2"}, 0, kToken);
  std::optional<Loss> loss;
  root.on_loss([&](const NodeLink::Loss& l) { return loss = Loss{l.host, l.why}, false; });
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    NodeLink node = NodeLink::connect("127.0.0.1", root.port(), 1, "n1", kToken, kLimit);
    pump(
        {&node}, [] { return false; }, std::chrono::seconds(60));
    ::_exit(0);
  }
  pump(
      {&root}, [] { return false; }, std::chrono::milliseconds(500));
  ASSERT_FALSE(loss) << loss->why;
  ASSERT_EQ(::kill(child, SIGSTOP), 0);
  const auto start = Clock::now();
  const bool lost = pump({&root}, [&] { return loss.has_value(); });
  const auto waited = Clock::now() - start;
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ASSERT_TRUE(lost);
  EXPECT_GE(waited, kLimit - NodeLink::heartbeat_for(kLimit));
  EXPECT_EQ(loss->host, "n2");
  EXPECT_EQ(loss->why, "silent for 1 s (--node-timeout): its node is off the network or its hyrun is stopped");
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

}  // namespace
}  // namespace hyrun
