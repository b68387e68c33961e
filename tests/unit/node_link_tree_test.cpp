// The node link's tree (link_tree.hpp, node_link.hpp): five hyrun processes' links over
// loopback, width 2, so the root watches tasks 1 and 2, and task 1 watches tasks 3 and 4
// (eight for what goes up more than one level: task 3 watches task 7). A node that stops
// (SIGSTOP) is a process of its own; the others run here.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "forked_node.hpp"
#include "hyrun/common/error.hpp"
#include "hyrun/link/link_tree.hpp"
#include "hyrun/link/node_link.hpp"
#include "hyrun/process/signal_events.hpp"
#include "link_pump.hpp"

namespace hyrun {
namespace {

using Clock = std::chrono::steady_clock;
using test_support::ForkedNode;
constexpr const char* kToken = "0123456789abcdef0123456789abcdef";
constexpr std::chrono::milliseconds kLimit{1000};
const std::vector<std::string> kHosts{"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"};

TEST(LinkTree, ParentsAndChildrenByWidth) {
  const LinkTree tree(2, 7);
  EXPECT_EQ(tree.parent(0), -1);
  EXPECT_EQ(tree.parent(1), 0);
  EXPECT_EQ(tree.parent(2), 0);
  EXPECT_EQ(tree.parent(3), 1);
  EXPECT_EQ(tree.parent(4), 1);
  EXPECT_EQ(tree.parent(5), 2);
  EXPECT_EQ(tree.parent(6), 2);
  EXPECT_EQ(tree.parent(7), -1);
  EXPECT_EQ(tree.children(0), (std::vector<int>{1, 2}));
  EXPECT_EQ(tree.children(2), (std::vector<int>{5, 6}));
  EXPECT_TRUE(tree.children(3).empty());
  EXPECT_TRUE(tree.neighbours(1, 3));
  EXPECT_TRUE(tree.neighbours(3, 1));
  EXPECT_FALSE(tree.neighbours(0, 3));
  EXPECT_FALSE(tree.neighbours(3, 4));
  EXPECT_FALSE(tree.neighbours(3, 3));
}

TEST(LinkTree, WithinIsATaskAndEveryTaskBelowIt) {
  const LinkTree tree(2, 9);  // 0 -> 1, 2; 1 -> 3, 4; 2 -> 5, 6; 3 -> 7, 8
  for (int t = 0; t < 9; ++t) EXPECT_TRUE(tree.within(t, 0)) << t;
  EXPECT_TRUE(tree.within(1, 1));
  EXPECT_TRUE(tree.within(8, 1));
  EXPECT_TRUE(tree.within(7, 3));
  EXPECT_FALSE(tree.within(5, 1));
  EXPECT_FALSE(tree.within(1, 3));  // above, not below
  EXPECT_FALSE(tree.within(4, 3));  // a sibling
  EXPECT_FALSE(tree.within(9, 0));  // out of range
  EXPECT_FALSE(tree.within(3, 9));
  EXPECT_FALSE(tree.within(-1, 0));
}

TEST(LinkTree, AWidthOfTheTasksOrMoreIsTheStar) {
  const LinkTree tree(8, 9);
  for (int t = 1; t < 9; ++t) EXPECT_EQ(tree.parent(t), 0) << t;
}

TEST(LinkTree, ATaskThatCannotTakeChildrenHandsThemToItsParent) {
  // Task 1 has no port: its children 3 and 4 go to the root; task 2 keeps 5 and 6, and
  // task 3's would-be children (7, 8) go to 3's parent, now the root.
  const LinkTree tree(2, 9, {true, false, true, true, true, true, true, true, true});
  EXPECT_EQ(tree.parent(3), 0);
  EXPECT_EQ(tree.parent(4), 0);
  EXPECT_EQ(tree.parent(5), 2);
  EXPECT_EQ(tree.parent(7), 3);
  const LinkTree deeper(2, 9, {true, false, true, false, true, true, true, true, true});
  EXPECT_EQ(deeper.parent(7), 0);
  EXPECT_EQ(deeper.children(1), std::vector<int>{});
}

TEST(LinkTree, AWidthOutOfRangeIsRefusedNamingTheRange) {
  try {
    LinkTree(0, 4);
    FAIL() << "a width of 0 was taken";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "a tree width of 0 is out of range: give 1 to 1048576");
  }
}

struct Seen {
  NodeLink::Loss loss;
  int by;
};

// The tree's runs take longer than the pair's: a silence, then the report up the tree.
bool pump(const std::vector<NodeLink*>& links, const std::function<bool()>& done,
          std::chrono::milliseconds limit = std::chrono::seconds(8)) {
  return test_support::pump(links, done, limit);
}

// `tasks` nodes (five unless said) of width 2. Some run here (links_), some in a process of
// their own (stopped by the test). `absorb`: whether the nodes' handlers let the job go on
// after a loss.
class Tree {
 public:
  // `late`: nodes here that link only at join(); `rootless`: nodes here that do not dial the
  // root (only their parent).
  Tree(const std::vector<int>& forked, bool absorb, int tasks = 5, std::set<int> late = {}, std::set<int> rootless = {})
      : tree_(2, tasks),
        hosts_(kHosts.begin(), kHosts.begin() + tasks),
        absorb_(absorb),
        late_(std::move(late)),
        rootless_(std::move(rootless)) {
    // The forked nodes first, while this process has no thread yet (forked_node.hpp): each
    // listens, tells its port, and waits for everyone's before it dials.
    for (const int task : forked) {
      forked_[task] = std::make_unique<ForkedNode>([this, task](ForkedNode& self) { run_forked(self, task); });
      ports_[task] = forked_[task]->heard();
    }
    for (int task = 0; task < tasks; ++task)
      if (!forked_.contains(task)) links_[task].emplace(make(task));
    std::vector<int> ports;
    for (int task = 0; task < tasks; ++task) ports.push_back(ports_.at(task));
    for (auto& [task, node] : forked_) node->send_words(ports);
    for (auto& [task, link] : links_)
      if (!late_.contains(task)) start_here(task);
  }
  void join(int task) {
    late_.erase(task);
    start_here(task);
  }
  // Where a late node dials the root on need (loopback unless said): set before join().
  void root_at(int task, std::string address) { root_addresses_[task] = std::move(address); }
  // A forked node sends the root a line now (its costs), dialling it on need.
  void send_to_root(int task) { forked_.at(task)->send_words({kSendToRoot}); }
  NodeLink& at(int task) { return *links_.at(task); }
  std::vector<NodeLink*> here() {
    std::vector<NodeLink*> out;
    for (auto& [task, link] : links_)
      if (link && !held_.contains(task) && !late_.contains(task)) out.push_back(&*link);
    return out;
  }
  // A held node's loop does not run (its writer still beats): what reaches it waits unread.
  void hold(int task) { held_.insert(task); }
  void release(int task) { held_.erase(task); }
  void stop(int task) { ASSERT_EQ(::kill(forked_.at(task)->pid(), SIGSTOP), 0); }
  void drop(int task) { links_.at(task).reset(); }
  // The node ends as a hyrun whose subtree ended does: bye, then its connections close.
  void leave(int task) {
    at(task).say_bye();
    drop(task);
  }
  bool run(const std::function<bool()>& done, std::chrono::milliseconds limit = std::chrono::seconds(8)) {
    return pump(here(), done, limit);
  }
  void run_for(std::chrono::milliseconds d) {
    pump(
        here(), [] { return false; }, d);
  }
  std::vector<Seen> seen;  // every loss any node here reported, with who reported it

 private:
  // Every node listens, as hyrun's do (for its children, and for direct modex); then its
  // slots, its dials.
  NodeLink make(int task) {
    NodeLink link = NodeLink::listen(kLimit);
    ports_[task] = link.port();
    return link;
  }
  void connect(NodeLink& link, int task) {
    link.expect(hosts_, task, kToken, tree_);
    link.locate_with([this](int t) {
      const auto it = ports_.find(t);
      return it == ports_.end() ? std::nullopt : std::optional(NodeLink::Endpoint{"127.0.0.1", it->second});
    });
    if (task == 0) return;
    // As hyrun's: the parent, and the root on need (but a node of `rootless`).
    if (const int parent = tree_.parent(task); parent > 0) {
      link.dial(parent, hosts_[static_cast<std::size_t>(parent)], "127.0.0.1", ports_.at(parent));
      if (!rootless_.contains(task)) {
        const auto address = root_addresses_.find(task);
        link.reach_root(hosts_[0], address == root_addresses_.end() ? "127.0.0.1" : address->second, ports_.at(0));
      }
    } else {
      link.dial(0, hosts_[0], "127.0.0.1", ports_.at(0));
    }
  }
  void start_here(int task) {
    NodeLink& link = *links_[task];
    connect(link, task);
    link.on_loss([this, task](const NodeLink::Loss& l) {
      seen.push_back({l, task});
      return absorb_ && l.task != 0;
    });
  }
  void run_forked(ForkedNode& self, int task) {
    NodeLink link = make(task);
    self.tell(link.port());
    const std::vector<int> ports = self.wait_words();
    for (int t = 0; t < static_cast<int>(ports.size()); ++t) ports_[t] = ports[t];
    connect(link, task);
    link.on_loss([](const NodeLink::Loss&) { return true; });
    const auto end = Clock::now() + std::chrono::seconds(60);
    while (pump(
        {&link}, [&] { return self.words_ready(); },
        std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()))) {
      if (self.wait_words() == std::vector<int>{kSendToRoot})
        link.send_to(0, format_link(LinkCosts{task, 1, 2, 3, 4, 5, 6}));
    }
  }
  static constexpr int kSendToRoot = 1;

  LinkTree tree_;
  std::vector<std::string> hosts_;
  std::set<int> held_;
  bool absorb_;
  std::set<int> late_;
  std::set<int> rootless_;
  std::map<int, int> ports_;
  std::map<int, std::string> root_addresses_;
  std::map<int, std::optional<NodeLink>> links_;
  std::map<int, std::unique_ptr<ForkedNode>> forked_;  // ended (SIGKILL) before links_ close
};

// A node's await_byes() on a thread of its own (hold() the node: its loop is the thread's).
// SIGHUP is blocked here and there (not in the writers' threads): one directed at the thread
// is a stop signal pending there, which ends a wait that outlived the test's limit.
class ByeWait {
 public:
  explicit ByeWait(NodeLink& link)
      : thread_([this, &link] {
          result_ = link.await_byes(signals_);
          ended_ = true;
        }) {}
  ByeWait(const ByeWait&) = delete;
  ByeWait& operator=(const ByeWait&) = delete;
  ~ByeWait() {
    if (thread_.joinable()) end();
  }
  bool ended() const { return ended_; }
  // Runs `tree` until the wait ends, at most `limit`; then ends it. True when it ended by itself.
  bool ends_within(Tree& tree, std::chrono::milliseconds limit) {
    const bool done = tree.run([this] { return ended_.load(); }, limit);
    end();
    return done;
  }
  // What await_byes() returned: false on a loss that ends the job.
  bool result() const { return result_; }

 private:
  void end() {
    if (!ended_) ::pthread_kill(thread_.native_handle(), SIGHUP);
    thread_.join();
  }
  SignalEvents signals_{SIGHUP};
  std::atomic<bool> ended_{false};
  bool result_ = false;
  std::thread thread_;
};

// `waiter` awaits byes (its loop held: the wait's) while `children` leave one by one: it goes
// on waiting while any of them runs, and ends once the last said bye.
void expect_awaits_exactly(Tree& tree, int waiter, const std::vector<int>& children) {
  tree.hold(waiter);
  ByeWait wait(tree.at(waiter));
  for (const int child : children) {
    tree.run_for(std::chrono::milliseconds(300));
    EXPECT_FALSE(wait.ended()) << "task " << waiter << " ended while task " << child << " ran";
    tree.leave(child);
  }
  EXPECT_TRUE(wait.ends_within(tree, std::chrono::seconds(8)))
      << "task " << waiter << " still waited once its children said bye";
  EXPECT_TRUE(wait.result());
}

bool seen_by(const std::vector<Seen>& seen, int by, int task) {
  return std::any_of(seen.begin(), seen.end(), [&](const Seen& s) { return s.by == by && s.loss.task == task; });
}

TEST(NodeLinkTree, EveryNodeStaysLinkedWhileTheTreeBeats) {
  Tree tree({}, false);
  tree.run_for(std::chrono::milliseconds(2500));  // past the 1 s limit, twice
  for (const auto& s : tree.seen)
    ADD_FAILURE() << "task " << s.by << " lost task " << s.loss.task << ": " << s.loss.why;
}

// The root does not watch task 3: its parent, task 1, does, and tells the root, which names
// task 3 (not task 1) and why, and decides: task 1 does not end the job itself.
TEST(NodeLinkTree, AStoppedGrandchildIsLostByItsParentAndNamedByTheRoot) {
  Tree tree({3}, false);
  tree.run_for(std::chrono::milliseconds(300));
  tree.stop(3);
  ASSERT_TRUE(tree.run([&] { return seen_by(tree.seen, 0, 3); }));
  tree.run_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(seen_by(tree.seen, 1, 3));
  EXPECT_FALSE(tree.at(1).lost());
  for (const auto& s : tree.seen) {
    EXPECT_EQ(s.loss.task, 3) << "task " << s.by << " lost task " << s.loss.task << ": " << s.loss.why;
    if (s.by == 0) {
      EXPECT_EQ(s.loss.why,
                "the hyrun of task 1, its tree parent, lost it: silent for 1 s (--node-timeout): its node is off the "
                "network or its hyrun is stopped");
    }
  }
}

// Task 1 stops: its children see it silent, are not taken for lost themselves, and the root
// names task 1; the job goes on (the children hear it from the root), and the root watches
// tasks 3 and 4 from then on.
TEST(NodeLinkTree, ANodeWhoseParentIsLostIsNotLostAndTheRootWatchesIt) {
  Tree tree({1}, true);
  tree.run_for(std::chrono::milliseconds(300));
  tree.stop(1);
  ASSERT_TRUE(
      tree.run([&] { return seen_by(tree.seen, 0, 1) && seen_by(tree.seen, 3, 1) && seen_by(tree.seen, 4, 1); }));
  tree.run_for(std::chrono::milliseconds(2500));  // twice the limit: 3 and 4 beat with the root now
  for (const auto& s : tree.seen) {
    EXPECT_EQ(s.loss.task, 1) << "task " << s.by << " lost task " << s.loss.task << ": " << s.loss.why;
    EXPECT_EQ(s.loss.relayed, s.by != 0) << s.by;  // the root's word, not their own
  }
  for (const int task : {0, 2, 3, 4}) EXPECT_FALSE(tree.at(task).lost()) << task;
  const auto by_root = std::find_if(tree.seen.begin(), tree.seen.end(), [](const Seen& s) { return s.by == 0; });
  // The root watches task 1 itself: its own silence limit or a child's report, whichever first.
  EXPECT_NE(by_root->loss.why.find("silent for 1 s"), std::string::npos) << by_root->loss.why;
}

// The root links with its children, and with another node only once that node needs it
// (here: task 5 sends it a line); task 6, which never does, never links with it.
TEST(NodeLinkTree, OnlyTheRootsChildrenLinkWithItUntilANodeNeedsIt) {
  Tree tree({}, false, 7);
  std::vector<int> from;
  tree.at(0).on(LinkKind::kCosts, [&from](int task, std::string_view) { return from.push_back(task), true; });
  tree.run_for(std::chrono::milliseconds(300));
  for (const int task : {1, 2}) EXPECT_TRUE(tree.at(0).send_to(task, format_link(LinkAlive{}))) << task;
  for (const int task : {3, 4, 5, 6}) EXPECT_FALSE(tree.at(0).send_to(task, format_link(LinkAlive{}))) << task;
  ASSERT_TRUE(tree.at(5).send_to(0, format_link(LinkCosts{5, 1, 2, 3, 4, 5, 6})));
  ASSERT_TRUE(tree.run([&] { return !from.empty(); }));
  EXPECT_EQ(from, std::vector<int>{5});
  EXPECT_TRUE(tree.at(0).send_to(5, format_link(LinkAlive{})));
  EXPECT_FALSE(tree.at(0).send_to(6, format_link(LinkAlive{})));
  tree.run_for(std::chrono::milliseconds(1500));  // past the limit: the root does not watch task 5
  for (const auto& s : tree.seen)
    ADD_FAILURE() << "task " << s.by << " lost task " << s.loss.task << ": " << s.loss.why;
}

// The root waits for its children's byes, which say that their subtrees ended, and for no
// other node's: tasks 3 and 4 are never heard from again, and the root ends.
TEST(NodeLinkTree, TheRootAwaitsItsChildrenNotEveryNode) {
  Tree tree({}, false);
  tree.run_for(std::chrono::milliseconds(300));
  tree.hold(3);
  tree.hold(4);
  expect_awaits_exactly(tree, 0, {1, 2});
}

// Task 1 is lost while its child, task 3, is gone too (both stopped): task 4 links with the
// root, which watches it from then on; task 3 never does, and the root names it at the
// connect limit as what it may be, not as a node it heard from.
TEST(NodeLinkTree, AChildOfALostNodeThatNeverLinksIsLostAtTheConnectLimitNamedSo) {
  Tree tree({1, 3}, true);
  tree.run_for(std::chrono::milliseconds(300));
  tree.stop(1);
  tree.stop(3);
  ASSERT_TRUE(tree.run([&] { return seen_by(tree.seen, 0, 1) && seen_by(tree.seen, 4, 1); }));
  ASSERT_TRUE(tree.run([&] { return seen_by(tree.seen, 0, 3); }, std::chrono::seconds(15)));
  const auto three =
      std::find_if(tree.seen.begin(), tree.seen.end(), [](const Seen& s) { return s.by == 0 && s.loss.task == 3; });
  EXPECT_EQ(three->loss.why,
            "it did not connect within 10 s of the loss of its tree parent (task 1): it was lost with it, or had ended "
            "before");
  for (const auto& s : tree.seen) EXPECT_NE(s.loss.task, 4) << "task " << s.by << " lost task 4: " << s.loss.why;
  EXPECT_FALSE(tree.at(4).lost());
}

// Tasks 5 and 7 end (their bye) while their parents run; then the parents, tasks 2 and 3, stop.
// The root adopts their children, but not the ones that had ended: task 2 had told the root of
// task 5's bye, task 3 had told task 1 of task 7's, and task 1 passes that up once it loses
// task 3. Only tasks 2 and 3 are lost, past the connect limit too; task 6 links with the root.
TEST(NodeLinkTree, AChildThatEndedBeforeItsParentWasLostIsNotTakenForLost) {
  Tree tree({2, 3}, true, 8);
  tree.run_for(std::chrono::milliseconds(300));
  tree.leave(5);
  tree.leave(7);
  tree.run_for(std::chrono::milliseconds(1000));  // the forked parents pass the byes on
  tree.stop(2);
  tree.stop(3);
  ASSERT_TRUE(tree.run([&] { return seen_by(tree.seen, 0, 2) && seen_by(tree.seen, 0, 3); }));
  tree.run_for(std::chrono::milliseconds(11500));  // past the connect limit (10 s) of the adopted
  for (const auto& s : tree.seen)
    EXPECT_TRUE(s.loss.task == 2 || s.loss.task == 3)
        << "task " << s.by << " lost task " << s.loss.task << ": " << s.loss.why;
  EXPECT_TRUE(seen_by(tree.seen, 6, 2));  // the root's word, on its connection to the root
  for (const int task : {0, 1, 4, 6}) EXPECT_FALSE(tree.at(task).lost()) << task;
}

// Task 7 ends; then its grandparent, task 1, is lost, and task 3 links with the root, which
// adopts it: task 3 tells the root again that task 7 ended (the word it gave task 1 died with
// it). When task 3 is lost too, the root does not wait for task 7.
TEST(NodeLinkTree, ANodeThatLinksWithTheRootForItsParentsLossTellsItWhichChildrenEnded) {
  Tree tree({1, 3}, true, 8);
  bool marked = false;  // task 3's costs, sent after what it retold
  tree.at(0).on(LinkKind::kCosts, [&marked](int task, std::string_view) {
    marked = marked || task == 3;
    return true;
  });
  tree.run_for(std::chrono::milliseconds(300));
  tree.leave(7);
  tree.run_for(std::chrono::milliseconds(1000));
  tree.stop(1);
  ASSERT_TRUE(tree.run([&] { return seen_by(tree.seen, 0, 1) && seen_by(tree.seen, 4, 1); }));
  // Task 3 sees task 1 silent and links with the root: what it tells it follows its hello.
  ASSERT_TRUE(tree.run([&] { return tree.at(0).send_to(3, format_link(LinkAlive{})); }));
  // Its writer's thread may send the hello alone, before its loop has queued the rest: a line
  // sent at the test's word (after that loop's turn) marks the retold words as read at the root.
  tree.send_to_root(3);
  ASSERT_TRUE(tree.run([&] { return marked; }));
  tree.stop(3);
  ASSERT_TRUE(tree.run([&] { return seen_by(tree.seen, 0, 3); }));
  tree.run_for(std::chrono::milliseconds(11500));  // past the connect limit (10 s) of the adopted
  for (const auto& s : tree.seen)
    EXPECT_TRUE(s.loss.task == 1 || s.loss.task == 3)
        << "task " << s.by << " lost task " << s.loss.task << ": " << s.loss.why;
  for (const int task : {0, 2, 4}) EXPECT_FALSE(tree.at(task).lost()) << task;
}

// Task 3, linked with the root on need, ends (its bye); task 1 then tells the root that it lost
// task 3 and that task 7 had ended, as a parent that missed the bye would. Both are old news at
// the root, not a lie: no one is lost.
TEST(NodeLinkTree, AnEndedWordOfANodeThatLeftIsOldNewsAtTheRoot) {
  Tree tree({}, false, 8);
  tree.at(0).on(LinkKind::kCosts, [](int, std::string_view) { return true; });
  tree.run_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(tree.at(3).send_to(0, format_link(LinkCosts{3, 1, 2, 3, 4, 5, 6})));
  ASSERT_TRUE(tree.run([&] { return tree.at(0).send_to(3, format_link(LinkAlive{})); }));
  tree.leave(3);
  tree.run_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(tree.at(1).send_to(0, format_link(LinkLoss{3, 1, "n3", "silent"})));
  ASSERT_TRUE(tree.at(1).send_to(0, format_link(LinkEnded{7})));
  tree.run_for(std::chrono::milliseconds(1500));
  for (const auto& s : tree.seen)
    ADD_FAILURE() << "task " << s.by << " lost task " << s.loss.task << ": " << s.loss.why;
}

// Task 4 ends and its parent, task 1, tells the root, then dies; but the root reads task 3's
// report of task 1's loss first (it came first: the root's loop was held meanwhile). What task
// 1 said before it went still counts: the root does not wait for task 4 to link, nor take it
// for lost at the connect limit. (epoll hands the readiness that came first out first; a beat
// of task 1 in the instant between the hold and task 3's line would let the old root pass.)
TEST(NodeLinkTree, ALostNodesLastWordsCountWhenAnotherReportOfItsLossIsReadFirst) {
  Tree tree({}, true);
  bool linked = false;  // task 3 linked with the root on need
  tree.at(0).on(LinkKind::kCosts, [&linked](int task, std::string_view) { return linked = linked || task == 3, true; });
  tree.run_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(tree.at(3).send_to(0, format_link(LinkCosts{3, 1, 2, 3, 4, 5, 6})));
  ASSERT_TRUE(tree.run([&] { return linked; }));
  tree.hold(0);
  ASSERT_TRUE(tree.at(3).send_to(0, format_link(LinkLoss{1, 3, "n1", "silent"})));
  tree.run_for(std::chrono::milliseconds(100));
  tree.leave(4);
  tree.run_for(std::chrono::milliseconds(300));  // task 1 tells the root of task 4's bye
  tree.drop(1);
  tree.release(0);
  ASSERT_TRUE(tree.run([&] { return seen_by(tree.seen, 0, 1); }));
  tree.run_for(std::chrono::milliseconds(11500));  // past the connect limit (10 s) of the adopted
  for (const auto& s : tree.seen)
    EXPECT_EQ(s.loss.task, 1) << "task " << s.by << " lost task " << s.loss.task << ": " << s.loss.why;
  for (const int task : {0, 2, 3}) EXPECT_FALSE(tree.at(task).lost()) << task;
}

// Only a parent says that its child ended, and to the nodes above it only: a word of a node
// outside the sender's subtree, or of the sender itself, or one passed up for a node whose
// parent was not lost, or one from a parent to its child, ends the link, and the root names
// the sender (the child that refused it: the parent it lost).
TEST(NodeLinkTree, AnEndedWordOfANodeOutsideTheSendersSubtreeIsRefused) {
  struct Case {
    int from, to, task, named;
  };
  for (const Case c : {Case{2, 0, 3, 2}, Case{2, 0, 2, 2}, Case{1, 0, 7, 1}, Case{1, 3, 4, 1}}) {
    Tree tree({}, false, 8);
    tree.run_for(std::chrono::milliseconds(300));
    ASSERT_TRUE(tree.at(c.from).send_to(c.to, format_link(LinkEnded{c.task}))) << c.task;
    // A parent that read its child's end would report that child first: the child's word is the one tested.
    if (c.to != 0) tree.hold(c.from);
    ASSERT_TRUE(tree.run([&] { return seen_by(tree.seen, 0, c.named); })) << c.task;
    const auto by_root = std::find_if(tree.seen.begin(), tree.seen.end(), [](const Seen& s) { return s.by == 0; });
    const std::string refused =
        fmt::format("it sent 'ended {}', of a kind (ended) that this hyrun does not take from it", c.task);
    EXPECT_EQ(by_root->loss.why,
              c.to == 0 ? refused : fmt::format("the hyrun of task {}, its tree child, lost it: {}", c.to, refused));
  }
}

// The root's word on a loss the job goes on without goes down the tree too: task 3, which is
// not linked with the root, hears of task 2's loss from its parent, as the root said it.
TEST(NodeLinkTree, TheRootsWordOnALossGoesDownTheTree) {
  Tree tree({2}, true, 5, {}, {3});
  tree.run_for(std::chrono::milliseconds(300));
  tree.stop(2);
  ASSERT_TRUE(tree.run([&] { return seen_by(tree.seen, 3, 2) && seen_by(tree.seen, 4, 2); }));
  tree.run_for(std::chrono::milliseconds(300));  // no second word reaches a node (task 4 hears it twice)
  for (const auto& s : tree.seen) {
    EXPECT_EQ(s.loss.task, 2) << "task " << s.by << " lost task " << s.loss.task << ": " << s.loss.why;
    EXPECT_EQ(s.loss.relayed, s.by != 0) << s.by;
    EXPECT_EQ(s.loss.reporter, 0) << s.by;  // the root's word, whoever passed it on
  }
  EXPECT_EQ(std::count_if(tree.seen.begin(), tree.seen.end(), [](const Seen& s) { return s.by == 4; }), 1);
}

// A node that links after the root went on without another hears of that loss when it links:
// from the root (task 2, its child), or from its parent (task 4, task 1's child).
TEST(NodeLinkTree, ANodeThatLinksAfterALossTheJobWentOnWithoutHearsOfIt) {
  Tree tree({3}, true, 5, {2, 4});
  tree.run_for(std::chrono::milliseconds(300));
  tree.stop(3);
  ASSERT_TRUE(tree.run([&] { return seen_by(tree.seen, 0, 3); }));
  tree.run_for(std::chrono::milliseconds(300));
  tree.join(2);
  tree.join(4);
  ASSERT_TRUE(tree.run([&] { return seen_by(tree.seen, 2, 3) && seen_by(tree.seen, 4, 3); }));
  for (const int by : {2, 4}) {
    const auto seen = std::find_if(tree.seen.begin(), tree.seen.end(), [by](const Seen& s) { return s.by == by; });
    EXPECT_TRUE(seen->loss.relayed) << by;
    EXPECT_EQ(seen->loss.reporter, 0) << by;
  }
  for (const int task : {0, 1, 2, 4}) EXPECT_FALSE(tree.at(task).lost()) << task;
}

// The root stops: only its children watch it; each ends and tells its own children, so the
// root's loss reaches every node.
TEST(NodeLinkTree, TheRootsLossReachesTheNodesThatDoNotWatchIt) {
  Tree tree({0}, false);
  tree.run_for(std::chrono::milliseconds(300));
  tree.stop(0);
  ASSERT_TRUE(tree.run([&] {
    return seen_by(tree.seen, 1, 0) && seen_by(tree.seen, 2, 0) && seen_by(tree.seen, 3, 0) && seen_by(tree.seen, 4, 0);
  }));
  for (const auto& s : tree.seen) {
    EXPECT_EQ(s.loss.task, 0) << "task " << s.by << " lost task " << s.loss.task << ": " << s.loss.why;
    EXPECT_EQ(s.loss.relayed, s.by > 2) << s.by;
    if (s.by > 2) {
      EXPECT_EQ(s.loss.reporter, 1) << s.by;
    }
  }
}

// Task 1 ends early (bye) while its children run: they do not link with the root for it (the
// job is ending: a launcher's signal reaches every node), and no one is taken for lost. Task 4
// then links with the root on need: the root watches it from its hello, and it beats to the
// root, which takes it for lost only once it stops (its node off the network).
TEST(NodeLinkTree, AChildOfAParentThatLeftEarlyIsWatchedByTheRootOnceItLinks) {
  Tree tree({4}, false);
  tree.at(0).on(LinkKind::kCosts, [](int, std::string_view) { return true; });
  tree.run_for(std::chrono::milliseconds(300));
  tree.leave(1);
  tree.run_for(std::chrono::milliseconds(2500));
  for (const int task : {3, 4}) EXPECT_FALSE(tree.at(0).send_to(task, format_link(LinkAlive{}))) << task;
  tree.send_to_root(4);
  ASSERT_TRUE(tree.run([&] { return tree.at(0).send_to(4, format_link(LinkAlive{})); }));
  tree.run_for(std::chrono::milliseconds(2500));  // past the 1 s limit, twice
  for (const auto& s : tree.seen)
    ADD_FAILURE() << "task " << s.by << " lost task " << s.loss.task << ": " << s.loss.why;
  tree.stop(4);
  ASSERT_TRUE(tree.run([&] { return seen_by(tree.seen, 0, 4); }));
  const auto by_root = std::find_if(tree.seen.begin(), tree.seen.end(), [](const Seen& s) { return s.by == 0; });
  EXPECT_EQ(by_root->loss.why, "silent for 1 s (--node-timeout): its node is off the network or its hyrun is stopped");
}

// Task 4 links with the root on need while its parent runs; task 1 then ends early (bye): the
// root watches task 4 from then on, and task 4's beats keep it linked until it stops.
TEST(NodeLinkTree, ANodeLinkedWithTheRootBeforeItsParentLeftIsWatchedThereFromTheBye) {
  Tree tree({4}, false);
  tree.at(0).on(LinkKind::kCosts, [](int, std::string_view) { return true; });
  tree.run_for(std::chrono::milliseconds(300));
  tree.send_to_root(4);
  ASSERT_TRUE(tree.run([&] { return tree.at(0).send_to(4, format_link(LinkAlive{})); }));
  tree.leave(1);
  tree.run_for(std::chrono::milliseconds(2500));  // past the 1 s limit, twice
  for (const auto& s : tree.seen)
    ADD_FAILURE() << "task " << s.by << " lost task " << s.loss.task << ": " << s.loss.why;
  tree.stop(4);
  ASSERT_TRUE(tree.run([&] { return seen_by(tree.seen, 0, 4); }));
  const auto by_root = std::find_if(tree.seen.begin(), tree.seen.end(), [](const Seen& s) { return s.by == 0; });
  EXPECT_EQ(by_root->loss.why, "silent for 1 s (--node-timeout): its node is off the network or its hyrun is stopped");
}

// Task 3's dial of the root on need fails at once (here: an address that is none): what it had
// for the root cannot go, so the root is lost to it, said at its next tick, and the job ends
// there as for any loss of the root, rather than a fence's part dropped in silence.
TEST(NodeLinkTree, ANodeWhoseDialOfTheRootFailsAtOnceTakesTheRootForLost) {
  Tree tree({}, false, 5, {3});
  tree.root_at(3, "256.0.0.1");
  tree.join(3);
  tree.run_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(tree.seen.empty());
  EXPECT_FALSE(tree.at(3).send_to(0, format_link(LinkFencePart{0, "00"})));
  ASSERT_TRUE(tree.run([&] { return seen_by(tree.seen, 3, 0); }, std::chrono::seconds(2)));
  EXPECT_EQ(tree.seen.front().loss.why,
            "cannot connect: the root's node link address '256.0.0.1' is not an IPv4 address");
  EXPECT_TRUE(tree.at(3).lost());
}

// A node may tell the root only of its own parent or children: a made-up loss of another
// node ends the teller's link, not the other node.
TEST(NodeLinkTree, ALossOfANodeThatIsNotTheTellersNeighbourIsRefused) {
  Tree tree({}, false);
  tree.run_for(std::chrono::milliseconds(300));
  tree.at(2).send_to(0, format_link(LinkLoss{3, 2, "n3", "made up"}));
  ASSERT_TRUE(tree.run([&] { return seen_by(tree.seen, 0, 2); }));
  EXPECT_FALSE(seen_by(tree.seen, 0, 3));
}

// A report that comes up through a node names a reporter of that node's subtree: task 2
// cannot pass on a loss that task 3's parent (task 1) saw.
TEST(NodeLinkTree, ALossPassedUpFromOutsideTheSendersSubtreeIsRefused) {
  Tree tree({}, false);
  tree.run_for(std::chrono::milliseconds(300));
  tree.at(2).send_to(0, format_link(LinkLoss{3, 1, "n3", "made up"}));
  ASSERT_TRUE(tree.run([&] { return seen_by(tree.seen, 0, 2); }));
  EXPECT_FALSE(seen_by(tree.seen, 0, 3));
}

// Task 7 stops; its parent, task 3, tells the root through its own parent, task 1: while
// task 1's loop does not run, the root does not hear of it (it does not watch task 7, and
// task 3 does not go around task 1); once task 1 runs again, the root names task 7 as task 3
// saw it.
TEST(NodeLinkTree, ALossGoesUpTheTreeThroughEveryParent) {
  Tree tree({7}, false, 8);
  tree.run_for(std::chrono::milliseconds(300));
  tree.hold(1);
  tree.stop(7);
  tree.run_for(std::chrono::milliseconds(2500));  // task 3 has judged task 7 (1 s) and told task 1
  EXPECT_FALSE(seen_by(tree.seen, 0, 7));
  tree.release(1);
  ASSERT_TRUE(tree.run([&] { return seen_by(tree.seen, 0, 7); }));
  for (const auto& s : tree.seen) {
    EXPECT_EQ(s.by, 0) << "task " << s.by << " lost task " << s.loss.task << ": " << s.loss.why;
    EXPECT_EQ(s.loss.task, 7) << s.loss.why;
    EXPECT_EQ(s.loss.why,
              "the hyrun of task 3, its tree parent, lost it: silent for 1 s (--node-timeout): its node is off the "
              "network or its hyrun is stopped");
  }
  EXPECT_FALSE(tree.at(1).lost());
  EXPECT_FALSE(tree.at(3).lost());
}

// Task 3's report of task 7 waits unread at task 1, which then ends: task 3 watches the root
// from then on and tells it again what it had sent up, so the loss is not lost with task 1.
TEST(NodeLinkTree, AReportThatWentUpThroughALostParentIsToldToTheRootAgain) {
  Tree tree({7}, true, 8);
  tree.run_for(std::chrono::milliseconds(300));
  tree.hold(1);
  tree.stop(7);
  tree.run_for(std::chrono::milliseconds(2500));
  ASSERT_FALSE(seen_by(tree.seen, 0, 7));
  tree.drop(1);  // its connections close: a loss the job goes on without
  ASSERT_TRUE(tree.run([&] { return seen_by(tree.seen, 0, 1) && seen_by(tree.seen, 0, 7); }));
  const auto by_root =
      std::find_if(tree.seen.begin(), tree.seen.end(), [](const Seen& s) { return s.by == 0 && s.loss.task == 7; });
  EXPECT_EQ(by_root->loss.why,
            "the hyrun of task 3, its tree parent, lost it: silent for 1 s (--node-timeout): its node is off the "
            "network or its hyrun is stopped");
}

// --timings' costs go up the tree: task 7's reach the root through tasks 3 and 1. A node
// passes up only its own subtree's: task 3 saying task 5's ends its link with task 1.
TEST(NodeLinkTree, CostsGoUpTheTreeAndOnlyFromTheSendersSubtree) {
  Tree tree({}, false, 8);
  std::vector<std::pair<int, LinkCosts>> got;  // sender, costs
  tree.at(0).on(LinkKind::kCosts, [&](int task, std::string_view body) {
    const auto costs = parse_link<LinkCosts>(body);
    if (costs) got.emplace_back(task, *costs);
    return costs.has_value();
  });
  tree.run_for(std::chrono::milliseconds(300));
  const LinkCosts sevens{7, 11, 12, 13, 14, 15, 16};
  tree.at(7).send_up(format_link(sevens));
  ASSERT_TRUE(tree.run([&] { return !got.empty(); }));
  EXPECT_EQ(got[0].first, 1);
  EXPECT_EQ(got[0].second, sevens);
  tree.at(3).send_up(format_link(LinkCosts{5, 1, 2, 3, 4, 5, 6}));
  ASSERT_TRUE(tree.run([&] { return seen_by(tree.seen, 0, 3); }));
  EXPECT_EQ(got.size(), 1u);
  const auto by_root = std::find_if(tree.seen.begin(), tree.seen.end(), [](const Seen& s) { return s.by == 0; });
  EXPECT_NE(by_root->loss.why.find("the hyrun of task 1, its tree parent, lost it: it sent 'costs 5 "),
            std::string::npos)
      << by_root->loss.why;
}

// A node's bye says that its subtree ended: task 1 waits for tasks 3 and 4 to say bye, and
// not for the root (which it never waits for), before it may say its own.
TEST(NodeLinkTree, ANodeAwaitsItsChildrensByesAndOnlyTheirs) {
  Tree tree({}, false);
  tree.run_for(std::chrono::milliseconds(300));
  expect_awaits_exactly(tree, 1, {3, 4});
  for (const auto& s : tree.seen)
    ADD_FAILURE() << "task " << s.by << " lost task " << s.loss.task << ": " << s.loss.why;
}

// Between two nodes of the tree only the link's own lines travel: a relay's line there ends
// that link, though the receiver takes that kind from the root.
TEST(NodeLinkTree, ATreeConnectionCarriesNoRelayLines) {
  Tree tree({}, false);
  tree.at(1).on(LinkKind::kFence, [](int, std::string_view) { return true; });
  tree.run_for(std::chrono::milliseconds(300));
  tree.at(3).send_to(1, format_link(LinkFencePart{1, "ab"}));
  ASSERT_TRUE(tree.run([&] { return seen_by(tree.seen, 0, 3); }));  // task 1 told the root
  const auto by_root = std::find_if(tree.seen.begin(), tree.seen.end(), [](const Seen& s) { return s.by == 0; });
  EXPECT_NE(
      by_root->loss.why.find(
          "the hyrun of task 1, its tree parent, lost it: it sent 'fence 1 6162', of a kind (fence) that this hyrun does not take"),
      std::string::npos)
      << by_root->loss.why;
}

// The root asks a node that is not linked with it (task 3 dials only its parent) on a
// connection of its own, as the nodes ask each other.
TEST(NodeLinkTree, TheRootAsksANodeNotLinkedWithItOnAConnectionOfItsOwn) {
  Tree tree({}, false, 5, {}, {3});
  std::vector<std::pair<int, std::uint64_t>> asked;  // asker, id
  tree.at(3).on(LinkKind::kDmodexGet, [&](int from, std::string_view body) {
    const auto get = parse_link<LinkDmodexGet>(body);
    if (!get) return false;
    asked.emplace_back(from, get->id);
    return tree.at(3).reply(from, format_link(LinkDmodexNone{get->id + 100}));
  });
  std::vector<std::pair<int, std::uint64_t>> answers;
  tree.at(0).on(LinkKind::kDmodexNone, [&answers](int from, std::string_view body) {
    const auto none = parse_link<LinkDmodexNone>(body);
    return none && (answers.emplace_back(from, none->id), true);
  });
  tree.run_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(tree.at(0).send_to(3, format_link(LinkDmodexGet{7, 6}))) << "task 3 is not linked with the root";
  ASSERT_TRUE(tree.at(0).ask(3, format_link(LinkDmodexGet{7, 6})));
  ASSERT_TRUE(tree.run([&] { return !answers.empty(); }));
  EXPECT_EQ(asked, (std::vector<std::pair<int, std::uint64_t>>{{0, 7}}));
  EXPECT_EQ(answers, (std::vector<std::pair<int, std::uint64_t>>{{3, 107}}));
  for (const auto& s : tree.seen)
    ADD_FAILURE() << "task " << s.by << " lost task " << s.loss.task << ": " << s.loss.why;
}

// What the root asks on a connection of its own is answered on the holder's own link to the
// root. So the root hears that it gets no answer when that connection ends only once none can
// come: task 4 ends it (here: it refuses the request) and is not linked with the root within
// the connect limit (10 s) of that. Task 3, linked with the root, ends it too: its answers may
// still come on its link, and its bye (its last line there) is what the root hears.
TEST(NodeLinkTree, TheRootHearsWhenANodeItAskedCanAnswerNoMore) {
  Tree tree({}, false);
  std::vector<int> unreachable;
  std::vector<int> byes;
  tree.at(0).on_unreachable([&unreachable](int task) { unreachable.push_back(task); });
  tree.at(0).on_bye([&byes](int task) { byes.push_back(task); });
  tree.at(0).on(LinkKind::kCosts, [](int, std::string_view) { return true; });
  for (const int task : {3, 4})
    tree.at(task).on(LinkKind::kDmodexGet, [](int, std::string_view) { return false; });  // ends the connection
  tree.run_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(tree.at(0).ask(4, format_link(LinkDmodexGet{1, 4})));
  const auto asked = Clock::now();
  tree.run_for(std::chrono::milliseconds(2000));
  EXPECT_TRUE(unreachable.empty()) << "task 4 may still link and answer";
  ASSERT_TRUE(tree.run([&] { return !unreachable.empty(); }, std::chrono::seconds(12)));
  EXPECT_GE(Clock::now() - asked, std::chrono::seconds(10));
  EXPECT_EQ(unreachable, std::vector<int>{4});
  ASSERT_TRUE(tree.at(3).send_to(0, format_link(LinkCosts{3, 1, 2, 3, 4, 5, 6})));
  ASSERT_TRUE(tree.run([&] { return tree.at(0).send_to(3, format_link(LinkAlive{})); }));
  ASSERT_TRUE(tree.at(0).ask(3, format_link(LinkDmodexGet{2, 3})));
  tree.run_for(std::chrono::milliseconds(500));
  tree.leave(3);
  ASSERT_TRUE(tree.run([&] { return !byes.empty(); }));
  tree.run_for(std::chrono::milliseconds(300));
  EXPECT_EQ(unreachable, std::vector<int>{4}) << "task 3 was linked with the root";
  EXPECT_EQ(byes, std::vector<int>{3});
  for (const auto& s : tree.seen)
    ADD_FAILURE() << "task " << s.by << " lost task " << s.loss.task << ": " << s.loss.why;
}

// Direct modex between two nodes that are not the root: task 3 asks its sibling 4, task 2
// (of the root's other subtree) and its own parent, task 1, on connections of its own, and
// each answers back on it. No line of it passes the root, and the connections stay open
// (no heartbeat goes on them, not even to the parent).
TEST(NodeLinkTree, ADirectModexGoesStraightToTheHolderAndItsAnswerComesBackOnTheAskersConnection) {
  Tree tree({}, false);
  std::vector<std::string> elsewhere;
  for (const LinkKind kind : {LinkKind::kDmodexGet, LinkKind::kDmodexData, LinkKind::kDmodexNone})
    tree.at(0).on(kind, [&elsewhere](int from, std::string_view body) {
      elsewhere.push_back(fmt::format("the root from {}: {}", from, body));
      return true;
    });
  std::vector<int> unreachable;
  tree.at(3).on_unreachable([&unreachable](int task) { unreachable.push_back(task); });
  std::map<int, std::vector<std::uint64_t>> asked;  // by holder: the ids it was asked
  for (const int holder : {1, 2, 4})
    tree.at(holder).on(LinkKind::kDmodexGet, [&tree, &asked, holder](int from, std::string_view body) {
      const auto get = parse_link<LinkDmodexGet>(body);
      if (!get || from != 3) return false;
      asked[holder].push_back(get->id);
      return tree.at(holder).reply(from, format_link(LinkDmodexNone{get->id + 100}));
    });
  std::vector<std::pair<int, std::uint64_t>> answers;
  tree.at(3).on(LinkKind::kDmodexNone, [&answers](int from, std::string_view body) {
    const auto none = parse_link<LinkDmodexNone>(body);
    return none && (answers.emplace_back(from, none->id), true);
  });
  tree.run_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(tree.at(3).ask(4, format_link(LinkDmodexGet{1, 8})));
  ASSERT_TRUE(tree.at(3).ask(2, format_link(LinkDmodexGet{2, 4})));
  ASSERT_TRUE(tree.at(3).ask(4, format_link(LinkDmodexGet{3, 9})));  // on the same connection
  ASSERT_TRUE(tree.at(3).ask(1, format_link(LinkDmodexGet{5, 2})));  // the parent
  EXPECT_FALSE(tree.at(3).ask(0, format_link(LinkDmodexGet{4, 0}))) << "the root is asked on its own connection";
  ASSERT_TRUE(tree.run([&] { return answers.size() == 4; }));
  tree.run_for(std::chrono::milliseconds(1500));  // heartbeats go every 200 ms: none on these connections
  ASSERT_TRUE(tree.at(3).ask(1, format_link(LinkDmodexGet{6, 3})));
  ASSERT_TRUE(tree.run([&] { return answers.size() == 5; }));
  std::sort(answers.begin(), answers.end());
  EXPECT_EQ(answers, (std::vector<std::pair<int, std::uint64_t>>{{1, 105}, {1, 106}, {2, 102}, {4, 101}, {4, 103}}));
  EXPECT_EQ(asked[4], (std::vector<std::uint64_t>{1, 3}));
  EXPECT_EQ(asked[2], std::vector<std::uint64_t>{2});
  EXPECT_EQ(asked[1], (std::vector<std::uint64_t>{5, 6}));
  EXPECT_TRUE(unreachable.empty()) << "a direct modex connection of task 3's ended, to task " << unreachable.front();
  EXPECT_TRUE(elsewhere.empty()) << elsewhere.front();
  for (const auto& s : tree.seen)
    ADD_FAILURE() << "task " << s.by << " lost task " << s.loss.task << ": " << s.loss.why;
}

// A direct modex connection is not watched: its end (the holder left, or it took a line that
// is not direct modex) is no loss, and the asker hears that the holder is unreachable.
TEST(NodeLinkTree, TheEndOfADirectModexConnectionIsNoLossAndTheAskerHearsOfIt) {
  Tree tree({}, false);
  std::vector<int> unreachable;
  tree.at(3).on_unreachable([&unreachable](int task) { unreachable.push_back(task); });
  tree.at(2).on(LinkKind::kDmodexGet, [](int, std::string_view) { return true; });
  tree.at(4).on(LinkKind::kDmodexGet, [](int, std::string_view) { return true; });
  tree.run_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(tree.at(3).ask(2, format_link(LinkDmodexGet{1, 4})));
  ASSERT_TRUE(tree.at(3).ask(4, format_link(LinkDmodexGet{2, 8})));
  tree.run_for(std::chrono::milliseconds(200));
  tree.at(2).say_bye();  // task 2 ends: its direct modex connections close, its tree ones say bye
  tree.drop(2);
  ASSERT_TRUE(tree.run([&] { return unreachable.size() == 1; }));
  EXPECT_EQ(unreachable, std::vector<int>{2});
  ASSERT_TRUE(tree.at(3).ask(4, format_link(LinkFencePart{1, "ab"})));  // not direct modex: task 4 closes
  ASSERT_TRUE(tree.run([&] { return unreachable.size() == 2; }));
  EXPECT_EQ(unreachable, (std::vector<int>{2, 4}));
  tree.run_for(std::chrono::milliseconds(1500));  // past the silence limit
  for (const auto& s : tree.seen)
    ADD_FAILURE() << "task " << s.by << " lost task " << s.loss.task << ": " << s.loss.why;
}

// A node's hyrun reads every node's record after the fence before it takes its children's
// connections (launch_sequence.cpp); a parent slower at that than its child (the root of 512
// simulated nodes: 58 s on 2 cores) accepts the child's connection, and beats to it, late. The
// child does not take a parent that has said nothing yet for lost before the launch's limit
// (--bootstrap-timeout), only at it; once the parent has spoken, its silence limit holds.
constexpr std::chrono::milliseconds kLaunchLimit{3000};

struct ParentAndChild {
  LinkTree tree{1, 2};  // 0 <- 1
  NodeLink parent = NodeLink::listen(kLimit);
  NodeLink child = NodeLink::unlistened(1, kToken, tree, kLimit);
  std::optional<NodeLink::Loss> parent_loss, child_loss;
  ParentAndChild() {
    parent.allow_launch(kLaunchLimit);
    child.allow_launch(kLaunchLimit);
    parent.on_loss([this](const NodeLink::Loss& l) { return parent_loss = l, false; });
    child.on_loss([this](const NodeLink::Loss& l) { return child_loss = l, false; });
  }
  void expect() { parent.expect({"n0", "n1"}, 0, kToken, tree); }
  void dial() { child.dial(0, "n0", "127.0.0.1", parent.port()); }
  // Both loops run past the silence limit, twice: linked, neither loses the other.
  void stay_linked() {
    pump(
        {&parent, &child}, [] { return false; }, 2 * kLimit);
    EXPECT_FALSE(child_loss) << child_loss->why;
    EXPECT_FALSE(parent_loss) << parent_loss->why;
  }
};

TEST(NodeLinkTree, AParentStillInItsLaunchIsNotLostBeforeTheLaunchLimit) {
  ParentAndChild nodes;
  nodes.dial();  // the parent's loop does not run: it reads records
  pump(
      {&nodes.child}, [&] { return nodes.child_loss.has_value(); }, 2 * kLimit + kLimit / 2);
  ASSERT_FALSE(nodes.child_loss) << nodes.child_loss->why;
  nodes.expect();
  nodes.stay_linked();
}

TEST(NodeLinkTree, AParentThatNeverSpeaksIsLostAtTheLaunchLimitNamedSo) {
  ParentAndChild nodes;
  const auto start = Clock::now();
  nodes.dial();
  ASSERT_TRUE(pump(
      {&nodes.child}, [&] { return nodes.child_loss.has_value(); }, 2 * kLaunchLimit));
  EXPECT_GE(Clock::now() - start, kLaunchLimit);
  EXPECT_EQ(nodes.child_loss->task, 0);
  EXPECT_EQ(nodes.child_loss->why,
            "it said nothing within 3 s of this node's connection (--bootstrap-timeout): its hyrun is stopped, "
            "or has not finished its launch");
}

// The parent is a process of its own, linked and then stopped (SIGSTOP): it has spoken, so
// the child takes it for lost at the silence limit, not the launch's.
TEST(NodeLinkTree, OnceTheParentHasSpokenItsSilenceLimitHolds) {
  const LinkTree tree(1, 2);
  ForkedNode forked([&tree](ForkedNode& self) {
    NodeLink parent = NodeLink::listen(kLimit);
    parent.allow_launch(kLaunchLimit);
    parent.expect({"n0", "n1"}, 0, kToken, tree);
    parent.on_loss([](const NodeLink::Loss&) { return true; });
    self.tell(parent.port());
    pump(
        {&parent}, [] { return false; }, std::chrono::seconds(60));
  });
  const int port = forked.heard();
  ASSERT_GT(port, 0);
  NodeLink child = NodeLink::unlistened(1, kToken, tree, kLimit);
  child.allow_launch(kLaunchLimit);
  std::optional<NodeLink::Loss> loss;
  child.on_loss([&](const NodeLink::Loss& l) { return loss = l, false; });
  child.dial(0, "n0", "127.0.0.1", port);
  ASSERT_TRUE(pump(
      {&child}, [&] { return loss.has_value() || child.bytes_received() > 0; }, kLimit));
  ASSERT_FALSE(loss) << loss->why;
  ASSERT_EQ(::kill(forked.pid(), SIGSTOP), 0);
  const auto stopped = Clock::now();
  ASSERT_TRUE(pump(
      {&child}, [&] { return loss.has_value(); }, kLaunchLimit));
  EXPECT_LT(Clock::now() - stopped, kLaunchLimit);
  EXPECT_EQ(loss->why, "silent for 1 s (--node-timeout): its node is off the network or its hyrun is stopped");
}

// The other way: a child slower than its parent at reading the records connects late. The
// parent takes it until the launch's limit, past the silence limit and the 10 s floor.
TEST(NodeLinkTree, AChildStillInItsLaunchIsNotLostBeforeTheLaunchLimit) {
  ParentAndChild nodes;
  nodes.parent.allow_launch(std::chrono::seconds(12));
  nodes.expect();
  pump(
      {&nodes.parent}, [&] { return nodes.parent_loss.has_value(); }, std::chrono::milliseconds(10500));
  ASSERT_FALSE(nodes.parent_loss) << nodes.parent_loss->why;
  nodes.dial();
  nodes.stay_linked();
}

}  // namespace
}  // namespace hyrun
