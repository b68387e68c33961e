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

#include <algorithm>

#include "captured_log.hpp"
#include "hyrun/common/error.hpp"
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

class JoinServerTest : public ::testing::Test {
 protected:
  RankPool pool{2, 6};
  JoinServer server{0, "the-token", join::Grant{{}, {}, 6, 2, 0, "00ff"}, "root-host", pool};
};

TEST_F(JoinServerTest, GrantsRanksToALaunchThatKnowsTheToken) {
  const auto g = join::request_ranks("127.0.0.1", server.port(), "the-token", 2, "node-b", 5s);
  EXPECT_EQ(g.ranks, (std::vector<int>{2, 3}));
  EXPECT_EQ(g.local_ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(g.world_size, 6);
  EXPECT_EQ(g.launch_ranks, 2);
  EXPECT_EQ(g.node_rank, 1);
  EXPECT_EQ(g.root_address, "00ff");
  const auto same_host = join::request_ranks("127.0.0.1", server.port(), "the-token", 1, "node-b", 5s);
  EXPECT_EQ(same_host.ranks, (std::vector<int>{4}));
  EXPECT_EQ(same_host.node_rank, 1) << "one node index per host";
  EXPECT_EQ(join::request_ranks("127.0.0.1", server.port(), "the-token", 1, "root-host", 5s).node_rank, 0);
}

TEST_F(JoinServerTest, RefusesAWrongTokenAndGivesNothingAway) {
  try {
    join::request_ranks("127.0.0.1", server.port(), "another-token", 2, "node-b", 5s);
    FAIL() << "a wrong token was admitted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("its proof does not match this job's token"), std::string::npos) << e.what();
  }
  EXPECT_EQ(join::request_ranks("127.0.0.1", server.port(), "the-token", 2, "node-b", 5s).ranks,
            (std::vector<int>{2, 3}));
}

TEST_F(JoinServerTest, AProbeOrGarbageAssignsNothingAndTheServerGoesOn) {
  ::close(connect_to(server.port()));  // the readiness probe: connect, close
  const int fd = connect_to(server.port());
  const auto greeting = join::read_line(fd, join::Clock::now() + 5s, "test");
  ASSERT_TRUE(greeting && join::parse_greeting(*greeting));
  join::write_all(fd, std::string(join::kMaxLine + 10, 'x'), "test");  // an overlong line
  ::close(fd);
  EXPECT_EQ(join::request_ranks("127.0.0.1", server.port(), "the-token", 4, "node-b", 5s).ranks,
            (std::vector<int>{2, 3, 4, 5}));
  EXPECT_THROW(join::request_ranks("127.0.0.1", server.port(), "the-token", 1, "node-b", 5s), Error) << "none left";
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
    EXPECT_EQ(join::request_ranks("127.0.0.1", server.port(), "the-token", 1, "node-b", 5s).ranks,
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

}  // namespace
}  // namespace hyrun::ep::elastic
