// The PMIx relay among the nodes' hyrun processes (launcher/pmix_relay.*): relays of one
// job wired to each other in this process, lines delivered in order as the node link would.
#include "hyrun/launcher/pmix_relay.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <tuple>

namespace hyrun {
namespace {

// What completed a request: nullopt while pending, then (ok, data).
using Outcome = std::shared_ptr<std::optional<std::pair<bool, std::string>>>;
// The outcomes that were refused as too large (not failed for another reason).
std::set<const void*> outcome_too_large;
bool too_large(const Outcome& outcome) { return outcome_too_large.contains(outcome.get()); }
// The request ended as refused for its size (not done, not failed as if a node were lost).
void expect_too_large(const Outcome& outcome, const char* who) {
  ASSERT_TRUE(*outcome) << who << ": still waits";
  EXPECT_FALSE((*outcome)->first) << who;
  EXPECT_TRUE(too_large(outcome)) << who << ": failed as if a node were lost";
}

std::pair<std::shared_ptr<pmix::PendingRequest>, Outcome> request(std::string part = {}) {
  auto outcome = std::make_shared<std::optional<std::pair<bool, std::string>>>();
  outcome_too_large.erase(outcome.get());  // an address an earlier outcome had
  auto pending = std::make_shared<pmix::PendingRequest>(
      std::move(part), [outcome](pmix::PendingRequest::Outcome result, std::string data) {
        *outcome = std::make_pair(result == pmix::PendingRequest::Outcome::kDone, std::move(data));
        if (result == pmix::PendingRequest::Outcome::kTooLarge) outcome_too_large.insert(outcome.get());
      });
  return {pending, outcome};
}

std::string random_bytes(std::mt19937& random, std::size_t size) {
  std::string bytes(size, '\0');
  for (auto& b : bytes) b = static_cast<char>(random());
  return bytes;
}

// One relay a task of `layout` (task t on host n<t+1>). Each node's server holds, for each
// of its ranks, the data in `committed` (what serve_local_data answers). Lines queue until
// deliver().
class Job {
 public:
  Job(int nodes, int per, std::size_t max_bytes = kMaxRelayedBytes) : Job(JobLayout::uniform(nodes, per), max_bytes) {}
  explicit Job(const JobLayout& layout, std::size_t max_bytes = kMaxRelayedBytes) {
    for (int t = 0; t < layout.tasks(); ++t) hosts_.push_back("n" + std::to_string(t + 1));
    for (int t = 0; t < layout.tasks(); ++t)
      relays_.push_back(std::make_unique<PmixRelay>(
          t, layout, hosts_,
          [this, t](int to, const std::string& body) {
            if (t == 0 && unlinked_.contains(to)) return false;
            lines_.emplace_back(t, to, body);
            return true;
          },
          [this, t, n = layout.tasks()](std::string body) {
            for (int to = 0; to < n; ++to)
              if (to != t) lines_.emplace_back(t, to, body);
          },
          [this, t](std::uint32_t rank, std::uint64_t id) { serves_.emplace_back(t, rank, id); }, max_bytes));
  }
  PmixRelay& node(int t) { return *relays_.at(static_cast<std::size_t>(t)); }
  // Direct modex straight between the nodes (NodeLink::ask, reply), but to a node in
  // `no_connection`.
  void direct(std::set<int> no_connection = {}) {
    no_connection_ = std::move(no_connection);
    for (int t = 0; t < static_cast<int>(relays_.size()); ++t) {
      const auto straight = [this, t](int to, const std::string& body) {
        if (no_connection_.contains(to) || no_connection_.contains(t)) return false;
        lines_.emplace_back(t, to, body);
        return true;
      };
      node(t).direct_through(straight, straight);
    }
  }
  // Task t has not linked with the root (yet): nothing the root sends reaches it (its own
  // lines to the root go, as its connection's would once made).
  void unlink(int t) { unlinked_.insert(t); }
  void link(int t) { unlinked_.erase(t); }
  // Node t's ranks join the next fence with `bytes` random bytes; what completes it.
  Outcome join(int t, std::size_t bytes) {
    auto [pending, outcome] = request(random_bytes(random_, bytes));
    node(t).fence(pending);
    return outcome;
  }

  // Delivers the first line queued; false when there is none or it was refused.
  bool deliver_one() {
    if (lines_.empty()) return false;
    const auto [from, to, body] = lines_.front();
    lines_.pop_front();
    ++lines_sent;
    return node(to).handle(from, body);
  }

  // Delivers the last line queued, ahead of the others; false when there is none or it was refused.
  bool deliver_last() {
    if (lines_.empty()) return false;
    const auto [from, to, body] = lines_.back();
    lines_.pop_back();
    return node(to).handle(from, body);
  }
  // Drops the lines queued between tasks a and b (their connection ended).
  void cut(int a, int b) {
    std::erase_if(lines_, [a, b](const auto& line) {
      const auto& [from, to, body] = line;
      return (from == a && to == b) || (from == b && to == a);
    });
  }

  // Hands the servers' answers asked for so far to their relays; true.
  bool deliver_serves() {
    while (!serves_.empty()) {
      const auto [t, rank, id] = serves_.front();
      serves_.pop_front();
      const auto it = committed.find(rank);
      node(t).local_data(id, it != committed.end(), it != committed.end() ? it->second : "");
    }
    return true;
  }

  // Delivers every line (and the servers' answers) until none is left; returns false when a
  // relay refused one.
  bool deliver() {
    while (!lines_.empty() || !serves_.empty()) {
      while (!serves_.empty()) {
        const auto [t, rank, id] = serves_.front();
        serves_.pop_front();
        served.emplace_back(t, rank);
        const auto it = committed.find(rank);
        node(t).local_data(id, it != committed.end(), it != committed.end() ? it->second : "");
      }
      if (lines_.empty()) break;
      const auto [from, to, body] = lines_.front();
      lines_.pop_front();
      ++lines_sent;
      longest_line = std::max(longest_line, body.size());
      if (body.starts_with("more ")) ++pieces_sent;
      if (from == 0 || to == 0) root_lines.push_back(body);
      if (!node(to).handle(from, body)) return false;
    }
    return true;
  }

  std::map<std::uint32_t, std::string> committed;
  std::vector<std::pair<int, std::uint32_t>> served;  // (task whose server was asked, rank)
  int lines_sent = 0;
  int pieces_sent = 0;
  std::vector<std::string> root_lines;  // to or from the root
  std::size_t longest_line = 0;

 private:
  std::mt19937 random_{12};
  std::vector<std::string> hosts_;
  std::vector<std::unique_ptr<PmixRelay>> relays_;
  std::deque<std::tuple<int, int, std::string>> lines_;
  std::deque<std::tuple<int, std::uint32_t, std::uint64_t>> serves_;
  std::set<int> no_connection_;
  std::set<int> unlinked_;
};

// Every node joins the job's next fence with parts[t], in `order`, and every line is
// delivered; then each node's fence completed with `whole`.
void expect_fence_everywhere(Job& job, const std::vector<std::string>& parts, std::initializer_list<int> order,
                             const std::string& whole) {
  std::vector<Outcome> outcomes(parts.size());
  for (const int t : order) {
    auto [pending, outcome] = request(parts[static_cast<std::size_t>(t)]);
    outcomes[static_cast<std::size_t>(t)] = outcome;
    job.node(t).fence(pending);
  }
  ASSERT_TRUE(job.deliver());
  for (std::size_t t = 0; t < parts.size(); ++t) {
    ASSERT_TRUE(*outcomes[t]) << "node " << t << "'s fence did not complete";
    EXPECT_TRUE((*outcomes[t])->first) << "node " << t;
    EXPECT_EQ((*outcomes[t])->second, whole) << "node " << t;
  }
}

TEST(PmixRelay, AFenceCompletesOnEveryNodeWithEveryPartInNodeOrder) {
  std::mt19937 random(7);
  Job job(4, 2);
  std::vector<std::string> parts;
  std::vector<Outcome> outcomes;
  for (int t = 0; t < 4; ++t) parts.push_back(random_bytes(random, 100 + 37 * static_cast<std::size_t>(t)));
  outcomes.resize(4);
  for (int t : {2, 3, 0, 1}) {  // the root is neither first nor last
    auto [pending, outcome] = request(parts[static_cast<std::size_t>(t)]);
    outcomes[static_cast<std::size_t>(t)] = outcome;
    job.node(t).fence(pending);
    ASSERT_TRUE(job.deliver());
    if (t != 1) {
      EXPECT_FALSE(*outcome) << "node " << t << "'s fence completed before every node joined";
    }
  }
  const std::string all = parts[0] + parts[1] + parts[2] + parts[3];
  for (int t = 0; t < 4; ++t) {
    ASSERT_TRUE(*outcomes[static_cast<std::size_t>(t)]) << "node " << t;
    EXPECT_TRUE((*outcomes[static_cast<std::size_t>(t)])->first);
    EXPECT_EQ((*outcomes[static_cast<std::size_t>(t)])->second, all) << "node " << t;
  }
}

TEST(PmixRelay, FencesCompleteInTheirOrderAndTheRootNamesWhatTheOldestWaitsFor) {
  Job job(3, 2);
  auto [root0, root0_done] = request("a");
  auto [n1_0, n1_0_done] = request("b");
  job.node(0).fence(root0);
  job.node(1).fence(n1_0);
  ASSERT_TRUE(job.deliver());
  EXPECT_EQ(job.node(0).waiting(), "PMIx fence 0 (MPI_Init, MPI_Finalize) waits for ranks 4-5 on n3");
  EXPECT_EQ(job.node(1).waiting(), std::nullopt);  // only the root knows
  auto [n2_0, n2_0_done] = request("c");
  job.node(2).fence(n2_0);
  ASSERT_TRUE(job.deliver());
  EXPECT_EQ(job.node(0).waiting(), std::nullopt);
  ASSERT_TRUE(*n2_0_done);
  EXPECT_EQ((*n2_0_done)->second, "abc");
  // The next fence: numbered 1 on every node.
  expect_fence_everywhere(job, {"x", "y", "z"}, {1, 2, 0}, "xyz");
}

TEST(PmixRelay, DirectModexIsServedByTheNodeThatHoldsTheRankThroughTheRoot) {
  std::mt19937 random(11);
  Job job(3, 2);
  for (std::uint32_t rank = 0; rank < 6; ++rank) job.committed[rank] = random_bytes(random, 64 + rank);
  // Node 1 wants rank 5 (node 2's), node 2 wants rank 0 (the root's), the root wants rank 3.
  const std::vector<std::pair<int, std::uint32_t>> asks{{1, 5}, {2, 0}, {0, 3}, {1, 4}};
  std::vector<Outcome> outcomes;
  for (const auto& [t, rank] : asks) {
    auto [pending, outcome] = request();
    outcomes.push_back(outcome);
    job.node(t).direct_modex(rank, pending);
  }
  ASSERT_TRUE(job.deliver());
  for (std::size_t i = 0; i < asks.size(); ++i) {
    ASSERT_TRUE(*outcomes[i]) << "request " << i;
    EXPECT_TRUE((*outcomes[i])->first);
    EXPECT_EQ((*outcomes[i])->second, job.committed[asks[i].second]) << "request " << i;
  }
}

// With direct modex straight between nodes, a node asks the holder itself and the answer
// comes back the same way: no line of it passes the root; the root's ranks are still asked of
// the root, and the root asks as before.
TEST(PmixRelay, DirectModexBetweenTwoNodesGoesStraightToTheHolderNotThroughTheRoot) {
  std::mt19937 random(13);
  Job job(4, 2);
  job.direct();
  for (std::uint32_t rank = 0; rank < 8; ++rank) job.committed[rank] = random_bytes(random, 40000 + rank);
  const std::vector<std::pair<int, std::uint32_t>> between{{1, 5}, {3, 2}, {2, 7}, {1, 6}};
  std::vector<Outcome> outcomes;
  for (const auto& [t, rank] : between) {
    auto [pending, outcome] = request();
    outcomes.push_back(outcome);
    job.node(t).direct_modex(rank, pending);
  }
  ASSERT_TRUE(job.deliver());
  EXPECT_TRUE(job.root_lines.empty()) << job.root_lines.front().substr(0, 40);
  for (std::size_t i = 0; i < between.size(); ++i) {
    ASSERT_TRUE(*outcomes[i]) << "request " << i;
    EXPECT_TRUE((*outcomes[i])->first);
    EXPECT_EQ((*outcomes[i])->second, job.committed[between[i].second]) << "request " << i;
  }
  const std::vector<std::pair<int, std::uint32_t>> with_root{{2, 1}, {0, 4}};
  outcomes.clear();
  for (const auto& [t, rank] : with_root) {
    auto [pending, outcome] = request();
    outcomes.push_back(outcome);
    job.node(t).direct_modex(rank, pending);
  }
  ASSERT_TRUE(job.deliver());
  EXPECT_FALSE(job.root_lines.empty());
  for (std::size_t i = 0; i < with_root.size(); ++i) {
    ASSERT_TRUE(*outcomes[i]) << "request " << i;
    EXPECT_EQ((*outcomes[i])->second, job.committed[with_root[i].second]) << "request " << i;
  }
}

// A node without a connection of its own to the holder asks through the root, as before.
TEST(PmixRelay, WithoutAConnectionToTheHolderADirectModexGoesThroughTheRoot) {
  Job job(3, 1);
  job.direct({2});
  job.committed[2] = "two";
  auto [pending, outcome] = request();
  job.node(1).direct_modex(2, pending);
  ASSERT_TRUE(job.deliver());
  ASSERT_TRUE(*outcome);
  EXPECT_EQ((*outcome)->second, "two");
  EXPECT_FALSE(job.root_lines.empty());
}

// Only the node asked answers: an answer from another node, or from the root for a request
// that went straight, is refused; once the holder's connection ends, what was asked there
// fails at once, and what was asked elsewhere does not.
TEST(PmixRelay, OnlyTheNodeAskedAnswersAndItsConnectionsEndFailsWhatWasAskedThere) {
  Job job(4, 1);
  job.direct();
  job.committed[3] = "three";
  auto [to_2, to_2_done] = request();
  auto [to_3, to_3_done] = request();
  job.node(1).direct_modex(2, to_2);  // id 0, straight to node 2
  job.node(1).direct_modex(3, to_3);  // id 1, straight to node 3
  EXPECT_FALSE(job.node(1).handle(3, "dmodex-none 0")) << "node 3 was not asked";
  EXPECT_FALSE(job.node(1).handle(0, "dmodex-none 0")) << "the root was not asked";
  job.cut(1, 2);
  job.node(1).unreachable(2);
  ASSERT_TRUE(*to_2_done);
  EXPECT_FALSE((*to_2_done)->first);
  EXPECT_FALSE(*to_3_done);
  ASSERT_TRUE(job.deliver());
  ASSERT_TRUE(*to_3_done);
  EXPECT_EQ((*to_3_done)->second, "three");
}

// A node's requests straight to this one come on their own connection, beside the one its
// answers' pieces come on: a request between an answer's pieces is taken, and the answer
// arrives whole.
TEST(PmixRelay, ARequestStraightFromANodeBetweenItsAnswersPiecesIsTaken) {
  std::mt19937 random(17);
  Job job(3, 1);
  job.direct();
  job.committed[2] = random_bytes(random, 3 * kLinkPieceBytes + 7);
  job.committed[1] = random_bytes(random, 99);
  auto [pending, outcome] = request();
  job.node(1).direct_modex(2, pending);
  ASSERT_TRUE(job.deliver_one());  // node 2 is asked
  ASSERT_TRUE(job.deliver_serves());
  ASSERT_TRUE(job.deliver_one());  // the answer's first piece reaches node 1
  auto [back, back_done] = request();
  job.node(2).direct_modex(1, back);  // node 2 asks for node 1's rank meanwhile
  ASSERT_TRUE(job.deliver_last()) << "a request between the pieces of an answer from the same node";
  ASSERT_TRUE(job.deliver());
  ASSERT_TRUE(*outcome);
  EXPECT_TRUE((*outcome)->second == job.committed[2]) << "the answer in pieces differs";
  ASSERT_TRUE(*back_done);
  EXPECT_EQ((*back_done)->second, job.committed[1]);
}

// Tasks of 2, 3 and 1 ranks (ranks 0-1, 2-4, 5): every rank's data comes from its own
// task's server, and the root names each task's own ranks.
TEST(PmixRelay, TasksOfDifferentSizesServeTheirOwnRanksAndAreNamedByThem) {
  const JobLayout layout = JobLayout::of_tasks({2, 3, 1}, {0, 1, 2});
  std::mt19937 random(12);
  Job job(layout);
  for (std::uint32_t rank = 0; rank < 6; ++rank) job.committed[rank] = random_bytes(random, 32 + rank);
  // Every task asks for every rank of the other tasks (its server serves its own).
  std::vector<std::pair<std::uint32_t, Outcome>> outcomes;
  for (int t = 0; t < 3; ++t)
    for (std::uint32_t rank = 0; rank < 6; ++rank) {
      if (layout.task_of(static_cast<int>(rank)) == t) continue;
      auto [pending, outcome] = request();
      outcomes.emplace_back(rank, outcome);
      job.node(t).direct_modex(rank, pending);
    }
  ASSERT_TRUE(job.deliver());
  for (const auto& [rank, outcome] : outcomes) {
    ASSERT_TRUE(*outcome) << "rank " << rank;
    EXPECT_EQ((*outcome)->second, job.committed[rank]) << "rank " << rank;
  }
  ASSERT_EQ(job.served.size(), outcomes.size());
  for (const auto& [t, rank] : job.served) EXPECT_EQ(t, layout.task_of(static_cast<int>(rank))) << "rank " << rank;
  auto [root_fence, root_done] = request("a");
  job.node(0).fence(root_fence);
  ASSERT_TRUE(job.deliver());
  EXPECT_EQ(job.node(0).waiting(), "PMIx fence 0 (MPI_Init, MPI_Finalize) waits for ranks 2-4 on n2, rank 5 on n3");
  auto [beyond, beyond_done] = request();
  job.node(1).direct_modex(6, beyond);  // past the job's 6 ranks
  ASSERT_TRUE(*beyond_done);
  EXPECT_FALSE((*beyond_done)->first);
}

TEST(PmixRelay, ADirectModexOfDataThatIsNotThereFails) {
  Job job(2, 2);
  auto [pending, outcome] = request();
  job.node(0).direct_modex(3, pending);  // node 1's server has nothing for rank 3
  ASSERT_TRUE(job.deliver());
  ASSERT_TRUE(*outcome);
  EXPECT_FALSE((*outcome)->first);
}

TEST(PmixRelay, LinesThatAreNotTheRelaysAreRefused) {
  Job job(3, 2);
  auto [root_fence, done] = request("r");
  job.node(0).fence(root_fence);
  for (const std::string body :
       {"fence", "fence x 00", "fence 0 0g", "fence 0 abc", "fence 999 00", "fenced 0 00", "dmodex-get 1 6",
        "dmodex-get 1 3", "dmodex-get 1 x", "dmodex-data 5 00", "dmodex-none 5", "dmodex-none 0 extra", "hello"})
    EXPECT_FALSE(job.node(0).handle(1, body)) << body;  // to the root, from node 1 (rank 3 is its own)
  EXPECT_TRUE(job.node(0).handle(1, "fence 0 00"));
  EXPECT_FALSE(job.node(0).handle(1, "fence 0 00")) << "a second part of one node for one fence";
  // To another node: only the root may ask it for its ranks, and only for its own.
  EXPECT_FALSE(job.node(1).handle(2, "dmodex-get 1 2"));
  EXPECT_FALSE(job.node(1).handle(0, "dmodex-get 1 4"));
  EXPECT_FALSE(job.node(1).handle(0, "fenced 0 00")) << "a fence this node never joined";
  EXPECT_FALSE(*done);
}

// Fences of every node and a direct modex whose data is longer than a line's piece: they
// go in pieces, no line is longer than the link's limit, and every byte arrives.
TEST(PmixRelay, DataLongerThanAPieceArrivesWholeInPieces) {
  std::mt19937 random(11);
  Job job(3, 2);
  std::vector<std::string> parts{random_bytes(random, 2 * kLinkPieceBytes + 5), random_bytes(random, 17),
                                 random_bytes(random, kLinkPieceBytes + 1)};
  std::vector<Outcome> outcomes;
  for (int t : {1, 2, 0}) {
    auto [pending, outcome] = request(parts[static_cast<std::size_t>(t)]);
    outcomes.push_back(outcome);
    job.node(t).fence(pending);
  }
  ASSERT_TRUE(job.deliver());
  const std::string all = parts[0] + parts[1] + parts[2];
  for (const auto& outcome : outcomes) {
    ASSERT_TRUE(*outcome);
    EXPECT_TRUE((*outcome)->first);
    EXPECT_TRUE((*outcome)->second == all)
        << "a fence's bytes differ (" << (*outcome)->second.size() << " of " << all.size() << ")";
  }
  // Node 2's part: 1 piece before its line; the whole, 3 before each of 2 lines.
  EXPECT_EQ(job.pieces_sent, 1 + 2 * 3);
  // Rank 4 (node 2) committed 3 pieces and a bit; node 1 asks for it through the root.
  job.committed[4] = random_bytes(random, 3 * kLinkPieceBytes + 3);
  auto [get, got] = request();
  job.node(1).direct_modex(4, get);
  ASSERT_TRUE(job.deliver());
  ASSERT_TRUE(*got);
  EXPECT_TRUE((*got)->first);
  EXPECT_TRUE((*got)->second == job.committed[4]);
  EXPECT_LE(job.longest_line, kLinkMaxLine - 64) << "a line (without its seal) past the link's limit";
}

// Whole fence past the limit: every node's fence fails, wherever its ranks are when the
// root finds out; a part sent before its node heard is dropped; the next fence goes on.
TEST(PmixRelay, AFenceWhosePartsTogetherPassTheLimitFailsOnEveryNode) {
  Job job(3, 2, 1000);
  const Outcome root0_done = job.join(0, 700);
  const Outcome n1_0_done = job.join(1, 400);
  // Node 2 joins after the root found out but before the news reached it: its part is late.
  job.deliver_one();
  const Outcome n2_0_done = job.join(2, 100);
  ASSERT_TRUE(job.deliver()) << "a part sent before its node heard of the failure ended the link";
  expect_too_large(root0_done, "the root");
  expect_too_large(n1_0_done, "node 1");
  expect_too_large(n2_0_done, "node 2");
  EXPECT_EQ(job.node(0).waiting(), std::nullopt);
  // Fence 1, small: numbered alike on every node and complete.
  expect_fence_everywhere(job, {"a", "b", "c"}, {0, 1, 2}, "abc");
}

// A node whose own part is past the limit sends none of it: it says so, and every node's
// fence fails, also that of a node whose ranks come to it later.
TEST(PmixRelay, ANodeWhosePartIsPastTheLimitFailsTheFenceEverywhere) {
  Job job(3, 2, 1000);
  const Outcome n1_0_done = job.join(1, 10);
  const Outcome n2_0_done = job.join(2, 1001);
  expect_too_large(n2_0_done, "node 2, whose part it is");
  ASSERT_TRUE(job.deliver());
  expect_too_large(n1_0_done, "node 1");
  EXPECT_LT(job.longest_line, 1000u) << "the part too large was sent";
  const Outcome root0_done = job.join(0, 1);  // the root's ranks come last
  expect_too_large(root0_done, "the root, whose ranks came last");
  expect_fence_everywhere(job, {"z", "x", "y"}, {1, 2, 0}, "zxy");
}

// The root finds a fence too large while a node finds its own part too large: each says so,
// and the root's word reaches that node too, for a fence it has failed already. Both are the
// same failure, not a protocol violation.
TEST(PmixRelay, ANodeAndTheRootThatFailOneFenceAtOnceAgree) {
  Job job(3, 2, 1000);
  const Outcome root0_done = job.join(0, 600);
  const Outcome n1_0_done = job.join(1, 500);
  job.deliver_one();                            // the root fails fence 0 (1100 bytes) and tells nodes 1 and 2
  const Outcome n2_0_done = job.join(2, 1001);  // before it heard: its own part is too large
  ASSERT_TRUE(job.deliver()) << "the root's word on a fence the node failed itself ended the link";
  expect_too_large(root0_done, "the root");
  expect_too_large(n1_0_done, "node 1");
  expect_too_large(n2_0_done, "node 2");
  expect_fence_everywhere(job, {"a", "b", "c"}, {2, 0, 1}, "abc");
}

// The root fails a fence before node 2 has linked with it: its word cannot reach node 2 then,
// so node 2 hears it when its part comes.
TEST(PmixRelay, AFenceFailedBeforeANodeLinkedFailsThereWhenItsPartComes) {
  Job job(3, 2, 1000);
  job.unlink(2);
  const Outcome root0_done = job.join(0, 700);
  const Outcome n1_0_done = job.join(1, 400);
  ASSERT_TRUE(job.deliver());
  expect_too_large(root0_done, "the root");
  expect_too_large(n1_0_done, "node 1");
  job.link(2);
  const Outcome n2_0_done = job.join(2, 100);
  ASSERT_TRUE(job.deliver()) << "node 2's late part ended the link";
  expect_too_large(n2_0_done, "node 2");
  expect_fence_everywhere(job, {"a", "b", "c"}, {0, 1, 2}, "abc");
}

// The root passes on a direct modex to a holder not linked with it on a connection of its own
// (NodeLink::ask); the holder answers on its own connection to the root. With no connection
// to be had, the request fails at once rather than waiting for an answer that cannot come.
TEST(PmixRelay, TheRootAsksAHolderNotLinkedWithItOnAConnectionOfItsOwn) {
  Job job(3, 1);
  job.direct();
  job.unlink(2);
  job.committed[2] = "two";
  auto [from_root, from_root_done] = request();
  auto [from_one, from_one_done] = request();
  job.node(0).direct_modex(2, from_root);
  job.node(1).direct_modex(2, from_one);  // straight to node 2, not through the root
  ASSERT_TRUE(job.deliver());
  for (const auto& done : {from_root_done, from_one_done}) {
    ASSERT_TRUE(*done);
    EXPECT_TRUE((*done)->first);
    EXPECT_EQ((*done)->second, "two");
  }
  job.direct({2});  // no connection to node 2 to be had
  auto [again, again_done] = request();
  job.node(0).direct_modex(2, again);
  ASSERT_TRUE(job.deliver());
  ASSERT_TRUE(*again_done) << "still waits";
  EXPECT_FALSE((*again_done)->first);
}

// The root asked node 2 (not linked with it) on a connection of its own, for its own rank and
// for node 1, and that connection gets no answer (it failed): both requests fail then, not at
// the job's end; an answer of node 2's that still comes is dropped, not taken for a fault (one
// to a request never made still is). What the root passed on on node 2's own link waits for
// that link (its answer comes there) until node 2 answers nothing more (its bye, its loss).
TEST(PmixRelay, WhatTheRootAskedOfAHolderThatCanAnswerNoMoreFailsThen) {
  Job job(3, 1);
  job.direct({1});  // node 1 asks through the root
  job.unlink(2);
  job.committed[2] = "two";
  auto [from_root, from_root_done] = request();
  auto [from_one, from_one_done] = request();
  job.node(0).direct_modex(2, from_root);
  job.node(1).direct_modex(2, from_one);
  while (job.deliver_one()) {
  }
  EXPECT_FALSE(*from_root_done);
  EXPECT_FALSE(*from_one_done);
  job.node(0).unreachable(2);
  ASSERT_TRUE(*from_root_done) << "still waits";
  EXPECT_FALSE((*from_root_done)->first);
  while (job.deliver_one()) {
  }
  ASSERT_TRUE(*from_one_done) << "still waits";
  EXPECT_FALSE((*from_one_done)->first);
  ASSERT_TRUE(job.deliver()) << "node 2's late answers were refused";
  EXPECT_EQ(job.served.size(), 2u);
  EXPECT_FALSE(job.node(0).handle(2, "dmodex-none 999"));

  job.link(2);
  auto [on_link, on_link_done] = request();
  job.node(0).direct_modex(2, on_link);
  while (job.deliver_one()) {
  }
  job.node(0).unreachable(2);  // a connection of the root's own ended: not the one this went on
  EXPECT_FALSE(*on_link_done);
  ASSERT_TRUE(job.deliver());
  ASSERT_TRUE(*on_link_done) << "still waits";
  EXPECT_TRUE((*on_link_done)->first);
  EXPECT_EQ((*on_link_done)->second, "two");
  auto [unanswered, unanswered_done] = request();
  job.node(0).direct_modex(2, unanswered);
  while (job.deliver_one()) {
  }
  job.node(0).gone(2);  // node 2 said bye (its last line) without answering
  ASSERT_TRUE(*unanswered_done) << "still waits";
  EXPECT_FALSE((*unanswered_done)->first);
}

TEST(PmixRelay, ADirectModexOfDataPastTheLimitFails) {
  Job job(2, 2, 1000);
  job.committed[3] = std::string(1001, 'd');
  auto [pending, outcome] = request();
  job.node(0).direct_modex(3, pending);
  ASSERT_TRUE(job.deliver());
  ASSERT_TRUE(*outcome);
  EXPECT_FALSE((*outcome)->first);
}

TEST(PmixRelay, PiecesOutOfTheirPlaceAndFailuresNotTheirsAreRefused) {
  Job job(3, 2, 1000);
  EXPECT_FALSE(job.node(0).handle(1, "more ")) << "a piece of nothing";
  EXPECT_TRUE(job.node(0).handle(1, "more 00"));
  EXPECT_FALSE(job.node(0).handle(1, "dmodex-none 1")) << "a line of another kind between the pieces";
  EXPECT_TRUE(job.node(0).handle(2, "more " + std::string(2 * 1000, 'a')));
  EXPECT_FALSE(job.node(0).handle(2, "more 00")) << "pieces past the limit";
  EXPECT_FALSE(job.node(1).handle(2, "fence-failed 0 why")) << "a failure from a node that is not the root";
  EXPECT_FALSE(job.node(1).handle(0, "fence-failed 0")) << "a failure that does not say why";
  EXPECT_TRUE(job.node(1).handle(0, "fence-failed 0 too much"));
  EXPECT_FALSE(job.node(1).handle(0, "fence-failed 0 too much")) << "said twice";
  EXPECT_FALSE(job.node(1).handle(0, "fence-failed 999 too much")) << "a fence far ahead";
}

TEST(PmixRelay, WithoutALinkEveryRequestFails) {
  PmixRelay relay(1, JobLayout::uniform(2, 2), {"n1", "n2"}, nullptr, nullptr, [](std::uint32_t, std::uint64_t) {});
  auto [fence, fence_done] = request("x");
  auto [modex, modex_done] = request();
  relay.fence(fence);
  relay.direct_modex(0, modex);
  ASSERT_TRUE(*fence_done);
  EXPECT_FALSE((*fence_done)->first);
  ASSERT_TRUE(*modex_done);
  EXPECT_FALSE((*modex_done)->first);
}

TEST(PmixRelay, ARequestDroppedWithoutAnAnswerFails) {
  Outcome outcome;
  {
    auto [pending, result] = request("x");
    outcome = result;
    Job job(2, 1);
    job.node(1).fence(pending);  // the root never joins: the relays go with the job
  }
  ASSERT_TRUE(*outcome);
  EXPECT_FALSE((*outcome)->first);
}

// --- Fences through the outer launcher's fence (gather_through, OuterFence) ---------------

// Relays whose fences go through a gather: each node's part is kept until every node handed
// its part of that fence, then every node gets every part in task order, as the outer
// launcher's fence would give them. No line goes over the link.
class GatherJob {
 public:
  GatherJob(int nodes, int per, std::size_t max_bytes = kMaxRelayedBytes) : max_bytes_(max_bytes) {
    const JobLayout layout = JobLayout::uniform(nodes, per);
    for (int t = 0; t < nodes; ++t) hosts_.push_back("n" + std::to_string(t + 1));
    for (int t = 0; t < nodes; ++t) {
      relays_.push_back(std::make_unique<PmixRelay>(
          t, layout, hosts_,
          [this](int, const std::string&) {
            ++lines_sent;
            return true;
          },
          [this](std::string) { ++lines_sent; }, [](std::uint32_t, std::uint64_t) {}, max_bytes));
      relays_.back()->gather_through([this, t](std::uint64_t number, std::string part) {
        auto& parts = handed_[number];
        parts.resize(hosts_.size());
        parts[static_cast<std::size_t>(t)] = std::move(part);
        if (++count_[number] == hosts_.size()) deliver(number);
      });
    }
  }
  PmixRelay& node(int t) { return *relays_.at(static_cast<std::size_t>(t)); }
  Outcome join(int t, std::string part) {
    auto [pending, outcome] = request(std::move(part));
    node(t).fence(pending);
    return outcome;
  }
  int lines_sent = 0;

 private:
  // As OuterFence does: past the limit (the parts and their marks), no parts, only the bytes.
  void deliver(std::uint64_t number) {
    std::size_t bytes = 0;
    for (const auto& part : handed_[number]) bytes += part.size();
    for (std::size_t t = 0; t < relays_.size(); ++t) {
      if (bytes > max_bytes_ + hosts_.size())
        relays_[t]->gathered(number, std::nullopt, bytes);
      else
        relays_[t]->gathered(number, handed_[number], bytes);
    }
  }
  std::size_t max_bytes_;
  std::vector<std::string> hosts_;
  std::vector<std::unique_ptr<PmixRelay>> relays_;
  std::map<std::uint64_t, std::vector<std::string>> handed_;
  std::map<std::uint64_t, std::size_t> count_;
};

TEST(PmixRelay, AFenceThroughTheOuterLauncherCompletesWithEveryPartInNodeOrderAndNoLine) {
  std::mt19937 random(21);
  GatherJob job(5, 2);
  for (int fence = 0; fence < 3; ++fence) {  // fences keep their numbers: each completes apart
    std::vector<std::string> parts;
    for (int t = 0; t < 5; ++t) parts.push_back(random_bytes(random, random() % 3000));
    std::vector<Outcome> outcomes(5);
    std::vector<int> order{0, 1, 2, 3, 4};
    std::shuffle(order.begin(), order.end(), random);
    for (std::size_t i = 0; i < order.size(); ++i) {
      const int t = order[i];
      outcomes[static_cast<std::size_t>(t)] = job.join(t, parts[static_cast<std::size_t>(t)]);
      if (i + 1 < order.size()) {
        EXPECT_FALSE(*outcomes[static_cast<std::size_t>(t)]) << "completed before every node joined";
        EXPECT_EQ(job.node(t).waiting(), fmt::format("PMIx fence {} (MPI_Init, MPI_Finalize) was open, in the outer "
                                                     "launcher's fence",
                                                     fence));
      }
    }
    std::string all;
    for (const auto& part : parts) all += part;
    for (int t = 0; t < 5; ++t) {
      const auto& outcome = outcomes[static_cast<std::size_t>(t)];
      ASSERT_TRUE(*outcome) << "fence " << fence << ", node " << t;
      EXPECT_TRUE((*outcome)->first);
      EXPECT_EQ((*outcome)->second, all) << "fence " << fence << ", node " << t;
      EXPECT_EQ(job.node(t).waiting(), std::nullopt);
    }
  }
  EXPECT_EQ(job.lines_sent, 0);
}

TEST(PmixRelay, AFenceThroughTheOuterLauncherWithOneNodesPartPastTheLimitFailsOnEveryNode) {
  GatherJob job(3, 1, 1000);
  std::vector<Outcome> outcomes{job.join(0, std::string(10, 'a')), job.join(1, std::string(1001, 'b')),
                                job.join(2, std::string(10, 'c'))};
  for (int t = 0; t < 3; ++t) expect_too_large(outcomes[static_cast<std::size_t>(t)], "a node");
  // The next fence is whole again on every node.
  std::vector<Outcome> next{job.join(2, "z"), job.join(0, "x"), job.join(1, "y")};
  for (const auto& outcome : next) {
    ASSERT_TRUE(*outcome);
    EXPECT_EQ((*outcome)->second, "xyz");
  }
}

TEST(PmixRelay, AFenceThroughTheOuterLauncherPastTheLimitTogetherFailsOnEveryNode) {
  GatherJob job(3, 1, 1000);
  std::vector<Outcome> outcomes{job.join(0, std::string(400, 'a')), job.join(1, std::string(400, 'b')),
                                job.join(2, std::string(400, 'c'))};
  for (int t = 0; t < 3; ++t) expect_too_large(outcomes[static_cast<std::size_t>(t)], "a node");
  // At the limit exactly: whole.
  std::vector<Outcome> next{job.join(0, std::string(500, 'x')), job.join(1, std::string(300, 'y')),
                            job.join(2, std::string(200, 'z'))};
  for (const auto& outcome : next) {
    ASSERT_TRUE(*outcome);
    EXPECT_TRUE((*outcome)->first);
    EXPECT_EQ((*outcome)->second.size(), 1000u);
  }
}

TEST(PmixRelay, AFenceThroughTheOuterLauncherWithAPartThatIsNotARelaysOrAFailureFails) {
  Job job(2, 1);
  job.node(0).gather_through([](std::uint64_t, std::string) {});
  auto [bad, bad_done] = request("a");
  job.node(0).fence(bad);
  job.node(0).gathered(0, std::vector<std::string>{"pa", "xb"}, 4);  // a part without a relay's mark
  expect_too_large(bad_done, "node 0");
  auto [fewer, fewer_done] = request("a");
  job.node(0).fence(fewer);
  job.node(0).gathered(1, std::vector<std::string>{"pa"}, 2);  // one part for two nodes
  expect_too_large(fewer_done, "node 0");
  auto [failed, failed_done] = request("a");
  job.node(0).fence(failed);
  job.node(0).gather_failed(2, "the outer launcher said no");
  ASSERT_TRUE(*failed_done);
  EXPECT_FALSE((*failed_done)->first);
  EXPECT_FALSE(too_large(failed_done));
  job.node(0).gathered(2, std::vector<std::string>{"pa", "pb"}, 4);  // late: nothing to complete
  job.node(0).gathered(7, std::vector<std::string>{"pa", "pb"}, 4);  // never opened
}

}  // namespace
}  // namespace hyrun
