// The join server's limits as docs/security.md states them ("ep-elastic's join server"),
// each checked on its own: the caps on waiting connections and which one goes, the
// listen backlog, the refusal of an overlong line, and a later launch trying again when the
// server sheds it before answering. (join_server_test.cpp checks that a launch gets in
// under a flood; this file checks the numbers and choices behind it.)
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "captured_log.hpp"
#include "hyrun/common/error.hpp"
#include "hyrun/common/unique_fd.hpp"
#include "join_protocol.hpp"
#include "join_server.hpp"
#include "listen_backlog.hpp"

namespace hyrun::ep::elastic {
namespace {

using namespace std::chrono_literals;
using test_support::CapturedLog;

// A connection to the server from the loopback address 127.0.0.`host`, greeted: the server
// accepted it and it now waits for its request.
UniqueFd greeted_from(int host, int port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in from{};
  from.sin_family = AF_INET;
  from.sin_addr.s_addr = htonl(INADDR_LOOPBACK - 1 + static_cast<uint32_t>(host));
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&from), sizeof from), 0) << std::strerror(errno);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof to), 0) << std::strerror(errno);
  const auto greeting = join::read_line(fd.get(), join::Clock::now() + 5s, "test");
  EXPECT_TRUE(greeting && join::parse_greeting(*greeting));
  return fd;
}

// True when the server closed `fd` (EOF, or reset), waiting at most `limit` for it.
bool closed_within(int fd, std::chrono::milliseconds limit) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(limit.count())) <= 0) return false;
  char c;
  return ::recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

class JoinServerLimits : public ::testing::Test {
 protected:
  RankPool pool{2, 6};
  JoinServer server{0, "the-token", join::Grant{{}, {}, 6, 2, 0, "00ff"}, "root-host", pool};
};

// "At most 32 connections from one address ... wait for their request. A new connection always
// gets in: it sheds the oldest waiting one of the address that holds the most."
TEST_F(JoinServerLimits, OneAddressHoldsAtMost32WaitingConnectionsAndItsOldestGo) {
  std::vector<UniqueFd> waiting;
  for (int i = 0; i < 40; ++i) waiting.push_back(greeted_from(2, server.port()));
  // Well within the 3 s request deadline of the newest: only the cap closes connections.
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(closed_within(waiting[i].get(), 1000ms)) << "connection " << i;
  for (int i = 8; i < 40; ++i) EXPECT_FALSE(closed_within(waiting[i].get(), 0ms)) << "connection " << i;
}

// "... and 256 in all wait for their request": from many addresses, none over its own cap.
TEST_F(JoinServerLimits, AtMost256ConnectionsWaitInAll) {
  std::vector<UniqueFd> waiting;
  for (int host = 2; host < 11; ++host)  // 9 addresses of 30: 270 connections
    for (int i = 0; i < 30; ++i) waiting.push_back(greeted_from(host, server.port()));
  std::this_thread::sleep_for(100ms);  // the last closes reach us (the deadline is 3 s away)
  int open = 0;
  for (const auto& fd : waiting) open += closed_within(fd.get(), 0ms) ? 0 : 1;
  EXPECT_EQ(open, 256);
}

// "The backlog is the kernel's longest (SOMAXCONN)": what ss reports for the listening port.
TEST_F(JoinServerLimits, TheListenBacklogIsTheKernelsLongest) {
  ASSERT_GT(test_support::kernel_somaxconn(), 0);
  const auto backlog = test_support::listen_backlog(server.port());
  if (!backlog) GTEST_SKIP() << "ss (iproute2) is not installed or lists nothing";
  EXPECT_EQ(*backlog, test_support::kernel_somaxconn());
}

// The refusal of an overlong line says so ("a line longer than 8192 bytes") and holds none
// of the peer's bytes.
TEST(JoinServerRefusalWords, ALineLongerThanTheLimitIsRefusedInTheseWords) {
  CapturedLog log;
  {
    RankPool pool{2, 6};
    JoinServer server{0, "the-token", join::Grant{{}, {}, 6, 2, 0, "00ff"}, "root-host", pool};
    const UniqueFd fd = greeted_from(1, server.port());
    join::write_all(fd.get(), std::string(join::kMaxLine + 10, 'x'), "test");
    EXPECT_TRUE(closed_within(fd.get(), 5000ms));
  }
  bool said = false;
  for (const auto& line : log.lines()) {
    EXPECT_EQ(line.find("xxxx"), std::string::npos) << line;
    said = said || line.find(fmt::format("sent a line longer than {} bytes", join::kMaxLine)) != std::string::npos;
  }
  EXPECT_TRUE(said);
  EXPECT_EQ(join::kMaxLine, 8192u) << "docs/security.md names 8192 bytes";
}

// A later launch "tries again when the server sheds it before answering": a server that
// greets the first connection and closes it after the request, then answers the second.
TEST(JoinClientRetry, ALaunchShedBeforeItsAnswerTriesAgain) {
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener.get(), 8), 0);
  socklen_t length = sizeof a;
  ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &length);
  int served = 0;
  std::thread fake_server([&] {
    for (; served < 2; ++served) {
      const UniqueFd c(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!c) return;
      const auto nonce = join::new_nonce();
      join::write_all(c.get(), join::greeting(nonce), "fake server");
      const auto request = join::read_line(c.get(), join::Clock::now() + 5s, "fake server");
      if (served == 0) continue;  // shed: closed without an answer
      join::write_all(c.get(), join::format_grant(join::Grant{{2}, {0}, 6, 2, 1, "00ff"}), "fake server");
    }
  });
  join::Grant grant;
  try {
    grant = join::request_ranks("127.0.0.1", ntohs(a.sin_port), "the-token", 1, "node-b", 10s).grant;
  } catch (const Error& e) {
    ADD_FAILURE() << "the launch gave up after being shed once: " << e.what();
  }
  ::shutdown(listener.get(), SHUT_RDWR);  // ends an accept still waiting
  fake_server.join();
  EXPECT_EQ(served, 2);
  EXPECT_EQ(grant.ranks, (std::vector<int>{2}));
}

}  // namespace
}  // namespace hyrun::ep::elastic
