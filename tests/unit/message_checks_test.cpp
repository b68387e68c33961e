// What a rank checks before it takes a message of the World's protocol (docs/security.md,
// "What the worker library checks"), played by three Communicators of one job in this
// process: rank 0 (A), rank 1 (B) and rank 2 (C). A sender that holds the job token can seal
// anything, so the tests seal what an attacker who replays or redirects captured messages
// would send, and then a genuine message: the receive must skip the first and take the second
// (no timeout decides a result).
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap.hpp"
#include "bootstrap_messages.hpp"
#include "communicator.hpp"
#include "hyrun/common/death_notice.hpp"
#include "hyrun/common/error.hpp"
#include "hyrun/common/hex.hpp"
#include "hyrun/common/unique_fd.hpp"
#include "join_admission.hpp"
#include "message_tag.hpp"
#include "node_leader.hpp"
#include "refusal.hpp"
#include "worker_log.hpp"

namespace hyrun {
namespace {

using namespace std::chrono_literals;
constexpr const char* kToken = "0123456789abcdef0123456789abcdef";
constexpr uint32_t kUserTag = 7;
// The tag of rank 1's point-to-point messages on kUserTag, as a forger seals them.
constexpr ucp_tag_t kRank1UserTag = tag::make(tag::Kind::kPointToPoint, 1, kUserTag);

std::vector<std::byte> bytes_of(const std::string& s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}
std::string text_of(const std::vector<std::byte>& b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

RankEnvironment contract_of(int rank, int world_size, int num_nodes = 1) {
  RankEnvironment c;
  c.rank = rank;
  c.world_size = world_size;
  c.local_rank = rank;
  c.local_world_size = world_size;
  c.num_nodes = num_nodes;
  c.job_token = kToken;
  c.bootstrap_timeout_ms = 20000;  // only ends a test that failed; no result waits for it
  return c;
}

std::vector<std::byte> address_of(const Communicator& comm) {
  const ucx::WorkerAddress address(comm.worker());
  return {address.bytes().begin(), address.bytes().end()};
}

// The worker library's log lines ("<level> <message>") while it lives.
struct WorkerLog {
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1000);
  spdlog::level::level_enum level = worker_log().level();
  WorkerLog() {
    sink->set_pattern("%l %v");
    worker_log().sinks().push_back(sink);
    worker_log().set_level(spdlog::level::warn);  // as in a job: refusals past the first 100 are at debug level
  }
  ~WorkerLog() {
    std::erase(worker_log().sinks(), sink);
    worker_log().set_level(level);
  }
  std::vector<std::string> lines() { return sink->last_formatted(); }
  int count(const std::string& part) {
    const auto all = lines();
    return static_cast<int>(
        std::count_if(all.begin(), all.end(), [&](const std::string& l) { return l.find(part) != std::string::npos; }));
  }
  std::string all() {
    std::string out;
    for (const auto& l : lines()) out += l + "\n";
    return out;
  }
};

// A job of three ranks on one node, every endpoint connected.
class MessageChecks : public ::testing::Test {
 protected:
  explicit MessageChecks(WorldOptions root_options = {})
      : a_(contract_of(0, 3), root_options), b_(contract_of(1, 3), {}), c_(contract_of(2, 3), {}) {}

  void connect_all() {
    const std::vector<bootstrap::Peer> table{{0, address_of(a_), {}}, {0, address_of(b_), {}}, {0, address_of(c_), {}}};
    for (Communicator* comm : {&a_, &b_, &c_}) comm->connect_endpoints(table);
  }
  // `from` sends `sealed` under tag `t` to rank 0, as it is (eager: completes without rank 0).
  static void send_raw(Communicator& from, ucp_tag_t t, const std::vector<std::byte>& sealed) {
    from.wait(from.start_send(0, from.endpoint_to(0), t, sealed, "a test message"), "a test message", 0);
  }
  // A join of `rank` carrying `address`, sealed by `from` for rank 0, sent to it on `ep`.
  void send_join(Communicator& from, const ucx::Endpoint& ep, int rank, const std::vector<std::byte>& address) {
    const auto t = tag::make(tag::Kind::kJoin, rank, 0);
    const auto sealed = from.seal(t, auth::process_id(address_of(a_)), bootstrap::encode({rank, 0, address, {}}));
    from.wait(from.start_send(-1, ep.get(), t, sealed, "a test join"), "a test join");
  }

  // `rank`'s join carrying `address`, sealed by `from` for rank 0 (A).
  std::vector<std::byte> sealed_join(const Communicator& from, int rank, const std::vector<std::byte>& address) {
    return from.seal(tag::make(tag::Kind::kJoin, rank, tag::kOneJoin), auth::process_id(address_of(a_)),
                     bootstrap::encode({rank, 0, address, {}}));
  }
  // `joins` in one bundle that `from` sends to A on `ep` as the carrier rank `carrier`.
  void send_bundle(Communicator& from, const ucx::Endpoint& ep, int carrier,
                   const std::vector<std::vector<std::byte>>& joins) {
    const auto t = tag::make(tag::Kind::kJoin, carrier, tag::kJoinBundle);
    const auto sealed = from.seal(t, auth::process_id(address_of(a_)), bootstrap::encode_bundle(joins));
    from.wait(from.start_send(-1, ep.get(), t, sealed, "a test bundle"), "a test bundle");
  }

  // B sends `text` the genuine way on kUserTag, and A takes it (past anything refused before it).
  void expect_delivered(const std::string& text) {
    b_.send(0, bytes_of(text), kUserTag);
    EXPECT_EQ(text_of(a_.recv(1, kUserTag)), text);
  }
  // A refused `n` point-to-point messages claiming rank 1, each for `reason`.
  void expect_refused_from_rank_1(int n, const std::string& reason) {
    EXPECT_EQ(log_.count("refused a point-to-point message claiming rank 1"), n) << log_.all();
    EXPECT_EQ(log_.count(reason), n) << log_.all();
  }

  WorkerLog log_;
  Communicator a_, b_, c_;
};

// "Rank 0 also refuses a join whose worker address it has already admitted, and a join sealed
// by another process than the one it names"; "a join already admitted" is refused when replayed.
TEST_F(MessageChecks, AJoinIsAdmittedOnceAndOnlyFromTheProcessItNames) {
  JoinAdmission admission(a_);
  const ucx::Endpoint b_to_a = b_.connect({0, address_of(a_), {}}), c_to_a = c_.connect({0, address_of(a_), {}});
  send_join(b_, b_to_a, 1, address_of(c_));  // sealed by B, naming C's process
  send_join(b_, b_to_a, 1, address_of(b_));
  send_join(b_, b_to_a, 1, address_of(b_));  // the same join again: a replay
  send_join(c_, c_to_a, 2, address_of(c_));
  std::set<int> admitted;
  for (int i = 0; i < 2; ++i) admitted.insert(admission.next("a test join", a_.deadline()).rank);
  EXPECT_EQ(admitted, (std::set<int>{1, 2}));
  // The replay may come after C's join: take what is left.
  const auto until = Communicator::Clock::now() + 10s;
  while (log_.count("already admitted") == 0 && Communicator::Clock::now() < until) {
    ucp_worker_progress(a_.worker());
    EXPECT_FALSE(admission.poll()) << "a join was admitted twice";
  }
  EXPECT_EQ(log_.count("refused a join message claiming rank 1 ("), 2) << log_.all();
  EXPECT_EQ(log_.count("sealed by another process than the one whose address it carries"), 1) << log_.all();
  EXPECT_EQ(log_.count("rank 1 with this address was already admitted (a replay)"), 1) << log_.all();
}

// "A node's leader carries the joins of its node to rank 0 in one message": B leads a node of
// B and C. It takes only C's join sealed for rank 0 by C, and rank 0 admits both joins from
// the one bundle.
TEST_F(MessageChecks, ALeaderCarriesItsNodesJoinsInOneMessageThatRank0AdmitsJoinByJoin) {
  JoinAdmission admission(a_);
  const ucx::Endpoint b_to_a = b_.connect({0, address_of(a_), {}}), c_to_b = c_.connect({0, address_of(b_), {}});
  const auto t = tag::make(tag::Kind::kJoin, 2, tag::kOneJoin);
  const auto send_to_b = [&](const std::vector<std::byte>& sealed) {
    c_.wait(c_.start_send(-1, c_to_b.get(), t, sealed, "a test join"), "a test join");
  };
  send_to_b(c_.seal(t, auth::process_id(address_of(b_)), bootstrap::encode({2, 0, address_of(c_), {}})));  // for B
  send_to_b(sealed_join(c_, 2, address_of(b_)));  // naming B's process
  send_to_b(sealed_join(c_, 2, address_of(c_)));
  EXPECT_EQ(bootstrap::carry_node_joins(b_, b_to_a.get(), auth::process_id(address_of(a_)), {1, 2},
                                        sealed_join(b_, 1, address_of(b_))),
            2);
  std::set<int> admitted;
  for (int i = 0; i < 2; ++i) admitted.insert(admission.next("a test join", a_.deadline()).rank);
  EXPECT_EQ(admitted, (std::set<int>{1, 2}));
  EXPECT_EQ(admission.messages(), 1) << "both joins came in one message";
  EXPECT_EQ(log_.count("rank 1: refused a join message claiming rank 2"), 2) << log_.all();
  EXPECT_EQ(log_.count("sealed for another tag or process (a replay)"), 1) << log_.all();
  EXPECT_EQ(log_.count("sealed by another process than the one whose address it carries"), 1) << log_.all();
  EXPECT_EQ(log_.count("rank 0: refused"), 0) << log_.all();
}

// "Rank 0 checks every join of a bundle as it checks one sent to it, and refuses the bundle
// whole for one that fails": nothing of a refused bundle is admitted.
TEST_F(MessageChecks, ABundleWithOneJoinThatFailsTheCheckIsRefusedWhole) {
  JoinAdmission admission(a_);
  const ucx::Endpoint b_to_a = b_.connect({0, address_of(a_), {}});
  const auto for_b = c_.seal(tag::make(tag::Kind::kJoin, 2, tag::kOneJoin), auth::process_id(address_of(b_)),
                             bootstrap::encode({2, 0, address_of(c_), {}}));
  send_bundle(b_, b_to_a, 1, {sealed_join(c_, 2, address_of(c_))});  // without its carrier's own join
  send_bundle(b_, b_to_a, 1, {sealed_join(b_, 1, address_of(b_)), for_b});
  send_bundle(b_, b_to_a, 1, {sealed_join(b_, 1, address_of(b_)), sealed_join(b_, 2, address_of(c_))});
  send_bundle(b_, b_to_a, 1, {sealed_join(b_, 1, address_of(b_)), sealed_join(c_, 2, address_of(c_))});
  std::set<int> admitted;
  for (int i = 0; i < 2; ++i) admitted.insert(admission.next("a test join", a_.deadline()).rank);
  EXPECT_EQ(admitted, (std::set<int>{1, 2}));
  EXPECT_EQ(admission.messages(), 1);
  EXPECT_EQ(log_.count("refused a join message claiming rank 1 ("), 3) << log_.all();
  EXPECT_EQ(log_.count("not sent by rank 1, which it names as its carrier, with its own join"), 1) << log_.all();
  EXPECT_EQ(log_.count("join 2 of the bundle was sealed for another tag or process (a replay)"), 1) << log_.all();
  EXPECT_EQ(log_.count("join 2 of the bundle: sealed by another process than the one whose address it carries"), 1)
      << log_.all();
  // The same bundle again: a replay, refused whole.
  send_bundle(b_, b_to_a, 1, {sealed_join(b_, 1, address_of(b_)), sealed_join(c_, 2, address_of(c_))});
  const auto until = Communicator::Clock::now() + 10s;
  while (log_.count("already admitted") == 0 && Communicator::Clock::now() < until) {
    ucp_worker_progress(a_.worker());
    EXPECT_FALSE(admission.poll()) << "a join was admitted twice";
  }
  EXPECT_EQ(log_.count("join 1 of the bundle: rank 1 with this address was already admitted (a replay)"), 1)
      << log_.all();
}

// "the trailer names the tag it came with and this process as the destination": a message
// sealed for another process, or under another tag, is refused (a replay to elsewhere).
TEST_F(MessageChecks, AMessageSealedForAnotherProcessOrTagIsRefused) {
  connect_all();
  send_raw(b_, kRank1UserTag, b_.seal(kRank1UserTag, auth::process_id(address_of(c_)), bytes_of("for rank 2"), 1));
  send_raw(b_, kRank1UserTag,
           b_.seal(tag::make(tag::Kind::kPointToPoint, 1, kUserTag + 1), a_.id_of(0), bytes_of("tag 8"), 1));
  expect_delivered("genuine");
  expect_refused_from_rank_1(2, "sealed for another tag or process (a replay)");
}

// "it comes from the process this rank knows as the claimed rank": rank 2, which holds the
// token, cannot pass a message off as rank 1's.
TEST_F(MessageChecks, AMessageFromAnotherProcessThanTheClaimedRankIsRefused) {
  connect_all();
  send_raw(c_, kRank1UserTag, c_.seal(kRank1UserTag, a_.id_of(0), bytes_of("forged"), 1));
  expect_delivered("genuine");
  expect_refused_from_rank_1(1, "sent by a process that is not that rank");
}

// "for point-to-point messages, its number is above the last one taken from that process on
// that tag (a replay is refused)".
TEST_F(MessageChecks, APointToPointMessageReplayedIsRefused) {
  connect_all();
  expect_delivered("first");
  // The very bytes of the first, again.
  send_raw(b_, kRank1UserTag, b_.seal(kRank1UserTag, a_.id_of(0), bytes_of("first"), 1));
  expect_delivered("second");
  EXPECT_EQ(log_.count("message number 1 was already received (a replay)"), 1) << log_.all();
}

// "a collective contribution already received (its sequence is in the tag; a copy of it
// matches no later receive and is dropped when the World ends)".
TEST_F(MessageChecks, ACollectiveContributionReplayedIsNeverTaken) {
  connect_all();
  const std::vector<int> only{0, 1};
  const auto round = [&](const std::string& a_part, const std::string& b_part) {
    std::vector<std::vector<std::byte>> b_result;
    std::thread b_side([&] { b_result = b_.allgatherv(bytes_of(b_part), only); });
    auto a_result = a_.allgatherv(bytes_of(a_part), only);
    b_side.join();
    EXPECT_EQ(text_of(b_result[0]), a_part);
    return text_of(a_result[1]);
  };
  ASSERT_EQ(round("a1", "b1"), "b1");
  const auto t1 = tag::make(tag::Kind::kCollective, 1, 1);
  send_raw(b_, t1, b_.seal(t1, a_.id_of(0), bytes_of("b1")));  // collective #1's contribution again
  EXPECT_EQ(round("a2", "b2"), "b2");
  EXPECT_EQ(log_.count("refused"), 0) << log_.all();  // not even looked at
  ucp_tag_recv_info_t info{};
  ucp_worker_progress(a_.worker());
  EXPECT_NE(ucp_tag_probe_nb(a_.worker(), t1, tag::kFullMask, 0, &info), nullptr) << "the copy should wait unmatched";
}

// "the first 100 refusals of a process as warnings, later ones at debug level": a flood writes
// at most 100 lines, and the rank goes on waiting for the real message.
TEST_F(MessageChecks, TheFirstHundredRefusalsAreWarningsAndLaterOnesAreNot) {
  connect_all();
  // From a thread of its own: so many messages fill the way to rank 0 until it takes some.
  std::thread flood([&] {
    for (int i = 0; i < 150; ++i) send_raw(b_, kRank1UserTag, bytes_of("unsealed " + std::to_string(i)));
    b_.send(0, bytes_of("genuine"), kUserTag);
  });
  EXPECT_EQ(text_of(a_.recv(1, kUserTag)), "genuine");
  flood.join();
  EXPECT_EQ(log_.count("warning "), 100) << log_.all();
  const auto lines = log_.lines();
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines.back().find("(further refusals are logged at debug level only)"), std::string::npos) << lines.back();
}

// "a collective contribution or a point-to-point message at most
// WorldOptions::max_message_bytes ... A larger message is taken out of UCX into an empty
// buffer: its payload is never read".
class MessageChecksSmallLimit : public MessageChecks {
 protected:
  MessageChecksSmallLimit() : MessageChecks(small_limit()) {}
  static WorldOptions small_limit() {
    WorldOptions o;
    o.max_message_bytes = 100;
    return o;
  }
};

TEST_F(MessageChecksSmallLimit, AMessageOverTheLimitIsRefusedUnread) {
  connect_all();
  send_raw(b_, kRank1UserTag, b_.seal(kRank1UserTag, a_.id_of(0), std::vector<std::byte>(101, std::byte{'x'}), 1));
  b_.send(0, std::vector<std::byte>(100, std::byte{'y'}), kUserTag);
  EXPECT_EQ(text_of(a_.recv(1, kUserTag)), std::string(100, 'y'));
  EXPECT_EQ(log_.count(fmt::format("claiming rank 1 ({} bytes): larger than the 100 bytes allowed, not read",
                                   101 + auth::kTrailerBytes)),
            1)
      << log_.all();
}

// An attacker on the network can "drop or delay messages: the job then fails with a timeout
// naming what did not arrive".
class MessageChecksShortTimeout : public MessageChecks {
 protected:
  MessageChecksShortTimeout() : MessageChecks(WorldOptions{.timeout = 300ms}) {}
};

TEST_F(MessageChecksShortTimeout, AMessageThatNeverComesIsATimeoutNamingIt) {
  connect_all();
  const std::string said = test_support::refusal<TimeoutError>([&] { a_.recv(1, kUserTag); });
  EXPECT_NE(said.find("rank 0: a message from rank 1 (tag 0x7) did not arrive within 300 ms"), std::string::npos)
      << "a message that was never sent was received, or another error: '" << said << "'";
}

// The same limit for a collective contribution: one too large is refused unread, and the
// collective takes the real contribution after it. And the default is 1 GiB, as documented.
TEST_F(MessageChecksSmallLimit, ACollectiveContributionOverTheLimitIsRefusedUnread) {
  EXPECT_EQ(WorldOptions{}.max_message_bytes, std::size_t{1} << 30) << "docs/security.md: 1 GiB by default";
  connect_all();
  const auto t = tag::make(tag::Kind::kCollective, 1, 1);
  send_raw(b_, t, b_.seal(t, a_.id_of(0), std::vector<std::byte>(101, std::byte{'x'})));
  std::vector<std::vector<std::byte>> b_result;
  std::thread b_side([&] { b_result = b_.allgatherv(bytes_of("b1"), {0, 1}); });
  const auto a_result = a_.allgatherv(bytes_of("a1"), {0, 1});
  b_side.join();
  EXPECT_EQ(text_of(a_result[1]), "b1");
  EXPECT_EQ(log_.count(fmt::format("refused a collective message claiming rank 1 ({} bytes): larger than the 100 "
                                   "bytes allowed, not read",
                                   101 + auth::kTrailerBytes)),
            1)
      << log_.all();
}

// "the table at most that per rank": rank 1 joining refuses a table from rank 0 larger than a
// table of the world's size can be, and takes the real one after it.
TEST(MessageChecksTable, AnAddressTableOverItsLimitIsRefusedUnread) {
  WorkerLog log_;
  Communicator root(contract_of(0, 2), {});
  RankEnvironment member_contract = contract_of(1, 2);
  member_contract.root_address_hex = to_hex(address_of(root));
  Communicator joining(member_contract, {});
  std::thread member_side([&] { bootstrap::start_member(joining); });
  JoinAdmission admission(root);
  const auto join = admission.next("the test's join", root.deadline());
  root.connect_endpoints({{0, address_of(root), {}}, {0, join.address, {}}});
  const auto t = tag::make(tag::Kind::kTable, 0, 0);
  const std::vector<std::byte> huge(bootstrap::max_table_bytes(2) + 1, std::byte{0});
  const auto sealed_huge = root.seal(t, root.id_of(1), huge);
  const auto sealed_table = root.seal(t, root.id_of(1), bootstrap::encode_table(root.table()));
  root.wait(root.start_send(1, root.endpoint_to(1), t, sealed_huge, "a huge table"), "a huge table", 1);
  root.wait(root.start_send(1, root.endpoint_to(1), t, sealed_table, "the table"), "the table", 1);
  member_side.join();
  EXPECT_EQ(joining.table(), root.table());
  EXPECT_EQ(log_.count(fmt::format("refused a address table message claiming rank 0 ({} bytes): larger than the {} "
                                   "bytes allowed, not read",
                                   huge.size() + auth::kTrailerBytes, bootstrap::max_table_bytes(2))),
            1)
      << log_.all();
}

// The tcp devices UCX opened for `comm`, as ucp_context_print_info lists its resources.
std::set<std::string> tcp_devices(const Communicator& comm) {
  std::set<std::string> out;
  char* text = nullptr;
  std::size_t size = 0;
  FILE* stream = ::open_memstream(&text, &size);
  ucp_context_print_info(comm.context(), stream);
  std::fclose(stream);
  const std::string info(text, size);
  std::free(text);
  for (std::size_t at = info.find("tcp/"); at != std::string::npos; at = info.find("tcp/", at + 4))
    out.insert(info.substr(at + 4, info.find_first_of(" \n", at) - at - 4));
  return out;
}

// "A job on one node sets UCX_NET_DEVICES=lo for its ranks' UCX unless the user set that
// variable, so it listens on the loopback interface only".
TEST(MessageChecksNetwork, AOneNodeJobListensOnLoopbackOnly) {
  ASSERT_EQ(std::getenv("UCX_NET_DEVICES"), nullptr) << "the test needs UCX to choose its devices";
  const Communicator one_node(contract_of(0, 2, 1), {});
  EXPECT_EQ(tcp_devices(one_node), (std::set<std::string>{"lo"}));
  const Communicator two_nodes(contract_of(0, 2, 2), {});
  const auto all = tcp_devices(two_nodes);
  if (all.size() < 2) GTEST_SKIP() << "this machine has no interface besides lo: the other half cannot be told";
  ::setenv("UCX_NET_DEVICES", "all", 1);  // the user's choice wins
  const Communicator chosen(contract_of(0, 2, 1), {});
  ::unsetenv("UCX_NET_DEVICES");
  EXPECT_EQ(tcp_devices(chosen), all);
}

// A rank that sends its last message and ends: the end of its process can be known (hyrun's
// notice, or a pidfd watch on this host) before the receiver has taken the message in, and
// a wait woken by both must still deliver it (elastic.local.two-plans failed so: rank 1
// "waiting for a message from rank 0 ...: rank 0 failed (its process ended)" after rank 0's
// last message). The ordering is held: rank 1's wait is stopped inside its poll (a signal
// handler that blocks) while rank 0 sends and its end is told, then let go.
int g_release_fd = -1;
std::atomic<bool> g_held{false};
void hold_until_released(int) {
  g_held = true;
  char c;
  while (::read(g_release_fd, &c, 1) < 0 && errno == EINTR) {
  }
}

char thread_state(pid_t tid) {
  std::ifstream stat(fmt::format("/proc/self/task/{}/stat", tid));
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() ? '?' : line[close + 2];
}

TEST(MessageFromAnEndedPeer, IsDeliveredThoughTheEndIsKnownBeforeTheMessageIsTakenIn) {
  int to_a[2], to_b[2], release[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, to_a), 0);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, to_b), 0);
  ASSERT_EQ(::pipe2(release, O_CLOEXEC), 0);
  const UniqueFd hyrun_a(to_a[0]), rank_a(to_a[1]), hyrun_b(to_b[0]), rank_b(to_b[1]);
  const UniqueFd release_read(release[0]), release_write(release[1]);
  WorldOptions with_deaths;
  with_deaths.peer_error_handling = true;  // both hear of deaths from "hyrun" (their control channels)
  RankEnvironment ca = contract_of(0, 2), cb = contract_of(1, 2);
  ca.control_fd = rank_a.get();
  cb.control_fd = rank_b.get();
  Communicator a(ca, with_deaths), b(cb, with_deaths);
  const std::vector<bootstrap::Peer> table{{0, address_of(a), {}}, {0, address_of(b), {}}};
  a.connect_endpoints(table);
  b.connect_endpoints(table);

  g_release_fd = release_read.get();
  struct sigaction hold {
  }, saved{};
  hold.sa_handler = hold_until_released;
  ASSERT_EQ(::sigaction(SIGUSR2, &hold, &saved), 0);
  std::atomic<pid_t> tid{0};
  std::string got;
  std::thread waiter([&] {
    tid = static_cast<pid_t>(::syscall(SYS_gettid));
    try {
      got = text_of(b.recv(0, kUserTag));
    } catch (const Error& e) {
      got = std::string("error: ") + e.what();
    }
  });
  const auto within = [](const std::function<bool()>& done) {
    for (const auto end = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < end;)
      if (done())
        return true;
      else
        std::this_thread::sleep_for(1ms);
    return false;
  };
  // Asleep in its wait: armed, nothing pending.
  EXPECT_TRUE(within([&] { return tid != 0 && thread_state(tid) == 'S'; }));
  ::pthread_kill(waiter.native_handle(), SIGUSR2);
  EXPECT_TRUE(within([] { return g_held.load(); }));
  a.send(1, bytes_of("the last word"), kUserTag);  // complete on rank 0's side: in rank 1's transport
  const std::string notice = format_rank_died(0);
  ASSERT_EQ(::send(hyrun_b.get(), notice.data(), notice.size(), MSG_NOSIGNAL), static_cast<ssize_t>(notice.size()));
  EXPECT_TRUE(within([&] { return b.is_failed(0); }));
  ASSERT_EQ(::write(release_write.get(), "x", 1), 1);
  waiter.join();
  ::sigaction(SIGUSR2, &saved, nullptr);
  EXPECT_EQ(got, "the last word");
}

}  // namespace
}  // namespace hyrun
