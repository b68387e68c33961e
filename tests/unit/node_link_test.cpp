// The node link between two hyrun processes, played by two NodeLink objects over loopback:
// what hybrid mode relies on to tell a lost node from one that finished.
#include "launcher/node_link.hpp"

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
    root.on_loss([this](const std::string& h, const std::string& w) { root_loss = Loss{h, w}; });
    node.emplace(NodeLink::connect("127.0.0.1", root.port(), 1, "n1", node_token));
    node->on_loss([this](const std::string& h, const std::string& w) { node_loss = Loss{h, w}; });
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
  pump({&pair.root, &*pair.node}, [] { return false; }, std::chrono::milliseconds(300));
  pair.node.reset();  // its hyrun died: the kernel closes the socket
  ASSERT_TRUE(pump({&pair.root}, [&] { return pair.root_loss.has_value(); }));
  EXPECT_EQ(pair.root_loss->host, "n2");
  EXPECT_EQ(pair.root_loss->why, "connection closed");
}

TEST(NodeLink, ANodeThatSaysByeIsNotLostAndTheRootStopsWaiting) {
  Pair pair;
  pump({&pair.root, &*pair.node}, [] { return false; }, std::chrono::milliseconds(300));
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
  pump({&pair.root, &*pair.node}, [] { return false; }, std::chrono::milliseconds(300));
  // The node's loop no longer runs (its network is gone): only the root's does.
  const auto start = Clock::now();
  ASSERT_TRUE(pump({&pair.root}, [&] { return pair.root_loss.has_value(); }));
  EXPECT_GE(Clock::now() - start, NodeLink::kSilenceLimit - NodeLink::kHeartbeat);
  EXPECT_EQ(pair.root_loss->host, "n2");
  EXPECT_NE(pair.root_loss->why.find("silent"), std::string::npos) << pair.root_loss->why;
}

TEST(NodeLink, TheRootIsLostByNameWhenItDies) {
  std::optional<Pair> pair(std::in_place);
  pump({&pair->root, &*pair->node}, [] { return false; }, std::chrono::milliseconds(300));
  NodeLink node = std::move(*pair->node);
  std::optional<Loss> loss;
  node.on_loss([&](const std::string& h, const std::string& w) { loss = Loss{h, w}; });
  pair.reset();  // the root's hyrun is gone
  ASSERT_TRUE(pump({&node}, [&] { return loss.has_value(); }));
  EXPECT_EQ(loss->host, "n1");
  EXPECT_EQ(loss->why, "connection closed");
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
