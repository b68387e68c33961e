// The node link between two hyrun processes, played by two NodeLink objects over loopback:
// what hybrid mode relies on to tell a lost node from one that finished.
#include "hyrun/launcher/node_link.hpp"

#include <gtest/gtest.h>
#include <poll.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace hyrun {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kToken = "0123456789abcdef0123456789abcdef";

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
  NodeLink root = NodeLink::listen();
  std::optional<Loss> root_loss, node_loss;
  std::optional<NodeLink> node;
  explicit Pair(const std::string& node_token = kToken) {
    root.expect({"n1", "n2"}, 0, kToken);
    root.on_loss([this](const NodeLink::Loss& l) { return root_loss = Loss{l.host, l.why}, false; });
    node.emplace(NodeLink::connect("127.0.0.1", root.port(), 1, "n1", node_token));
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

TEST(NodeLink, ASilentNodeIsLostAfterTheSilenceLimit) {
  Pair pair;
  pump(
      {&pair.root, &*pair.node}, [] { return false; }, std::chrono::milliseconds(300));
  // The node's loop no longer runs (its network is gone): only the root's does.
  const auto start = Clock::now();
  ASSERT_TRUE(pump({&pair.root}, [&] { return pair.root_loss.has_value(); }));
  EXPECT_GE(Clock::now() - start, NodeLink::kSilenceLimit - NodeLink::kHeartbeat);
  EXPECT_EQ(pair.root_loss->host, "n2");
  EXPECT_NE(pair.root_loss->why.find("silent"), std::string::npos) << pair.root_loss->why;
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
  NodeLink root = NodeLink::listen();
  root.expect({"n1", "n2", "n3"}, 0, kToken);
  std::vector<NodeLink::Loss> root_losses, relayed;
  root.on_loss([&](const NodeLink::Loss& l) { return root_losses.push_back(l), true; });
  NodeLink second = NodeLink::connect("127.0.0.1", root.port(), 1, "n1", kToken);
  second.on_loss([&](const NodeLink::Loss& l) { return relayed.push_back(l), true; });
  std::optional<NodeLink> third(NodeLink::connect("127.0.0.1", root.port(), 2, "n1", kToken));
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
  NodeLink root = NodeLink::listen();
  root.expect({"n1", "n2", "n3"}, 0, kToken);
  std::optional<NodeLink::Loss> root_loss, relayed;
  root.on_loss([&](const NodeLink::Loss& l) { return root_loss = l, false; });
  NodeLink second = NodeLink::connect("127.0.0.1", root.port(), 1, "n1", kToken);
  second.on_loss([&](const NodeLink::Loss& l) { return relayed = l, false; });
  std::optional<NodeLink> third(NodeLink::connect("127.0.0.1", root.port(), 2, "n1", kToken));
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
