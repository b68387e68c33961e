// The node link's sending side: heartbeats from its own thread while the main loop sends its
// own lines, each line whole on the wire, and nothing written to a peer once it is removed.
#include "hyrun/link/link_writer.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hyrun/process/unique_fd.hpp"

namespace hyrun {
namespace {

using Clock = std::chrono::steady_clock;

struct SocketPair {
  UniqueFd ours, theirs;
  SocketPair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    ours = UniqueFd(fds[0]);
    theirs = UniqueFd(fds[1]);
    set_nonblocking(ours.get());
  }
};

// Everything `fd` receives within `limit` (or until its writer closes).
std::string read_for(int fd, std::chrono::milliseconds limit) {
  std::string all;
  const auto end = Clock::now() + limit;
  char buffer[4096];
  while (Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10) <= 0) continue;
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n <= 0) break;
    all.append(buffer, static_cast<std::size_t>(n));
  }
  return all;
}

// Both ends of one direction of a link (link_seal.hpp): the writer seals, the test opens.
LinkSeal sealer() { return LinkSeal("token", 1, "00112233445566778899aabbccddeeff", LinkSeal::Direction::kToRoot); }

// The bodies of the sealed lines in `got`, in order; a line that does not open fails the test.
std::vector<std::string> bodies(const std::string& got) {
  LinkSeal opener = sealer();
  std::vector<std::string> out;
  std::istringstream lines(got);
  for (std::string line; std::getline(lines, line);) {
    const auto body = opener.open(line);
    if (!body) {
      ADD_FAILURE() << "a line that is not the next sealed one: " << line;
      break;
    }
    out.push_back(*body);
  }
  return out;
}

TEST(LinkWriter, HeartbeatsFlowWithoutTheMainLoop) {
  SocketPair pair;
  LinkWriter writer(std::chrono::milliseconds(10));
  writer.add(3, pair.ours.get(), false, sealer());
  const std::string got = read_for(pair.theirs.get(), std::chrono::milliseconds(300));
  int beats = 0;
  for (const auto& line : bodies(got)) {
    EXPECT_EQ(line, "alive");
    ++beats;
  }
  EXPECT_GE(beats, 5) << "heartbeats every 10 ms for 300 ms, with nobody calling the writer";
  writer.remove(3);
}

// A dialled peer's first line must be the dialler's hello: the peer refuses a connection whose
// first line is anything else. When the hello was queued after the add, a beat that came due in
// between went first (local.mpi.simulated-128-nodes failed once in CI: a child's parent refused
// it, and the child's next write met EPIPE); the hello now comes with the add.
TEST(LinkWriter, ADialledPeersFirstLineIsItsHelloThoughABeatIsDue) {
  SocketPair pair;
  LinkWriter writer(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // a beat is due as the peer comes
  writer.add(1, pair.ours.get(), false, sealer(), true, "hello");
  const std::string got = read_for(pair.theirs.get(), std::chrono::milliseconds(100));
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.substr(0, got.find('\n')), "hello");
  writer.remove(1);
}

TEST(LinkWriter, LinesStayWholeWhileHeartbeatsInterleave) {
  // Long random lines from this thread while the writer's thread beats every millisecond and
  // a slow reader keeps the socket full: every line arrives whole, in order, once.
  SocketPair pair;
  std::string received;
  std::thread reader([&] { received = read_for(pair.theirs.get(), std::chrono::seconds(3)); });
  std::mt19937 random(std::random_device{}());
  std::vector<std::string> sent;
  {
    LinkWriter writer(std::chrono::milliseconds(1));
    writer.add(1, pair.ours.get(), false, sealer());
    for (int i = 0; i < 300; ++i) {
      std::string line = "line " + std::to_string(i) + " ";
      line.append(random() % 200, static_cast<char>('a' + random() % 26));
      writer.send(1, line);
      sent.push_back(line);
      // What the socket did not take is sent when it drains, as the poll loop would.
      while (writer.wants_out(1)) {
        pollfd p{pair.ours.get(), POLLOUT, 0};
        ::poll(&p, 1, 10);
        writer.flush(1);
      }
    }
  }
  reader.join();
  std::size_t next = 0;
  for (const auto& line : bodies(received)) {
    if (line == "alive") continue;
    ASSERT_LT(next, sent.size()) << "an extra line: " << line;
    ASSERT_EQ(line, sent[next]) << "line " << next << " was cut or mixed";
    ++next;
  }
  EXPECT_EQ(next, sent.size());
}

TEST(LinkWriter, NothingIsWrittenToARemovedOrByePeer) {
  SocketPair a, b;
  LinkWriter writer(std::chrono::milliseconds(5));
  writer.add(1, a.ours.get(), false, sealer());
  writer.add(2, b.ours.get(), false, sealer());
  writer.stop_heartbeats(1);
  writer.remove(2);
  writer.send(2, "never");
  EXPECT_EQ(read_for(a.theirs.get(), std::chrono::milliseconds(100)), "");
  EXPECT_EQ(read_for(b.theirs.get(), std::chrono::milliseconds(100)), "");
  writer.send(1, "bye");  // lines still go to a peer without heartbeats
  EXPECT_EQ(bodies(read_for(a.theirs.get(), std::chrono::milliseconds(100))), std::vector<std::string>{"bye"});
}

// A connect that stays in progress: the listener's backlog (0: one connection) is full, so the
// kernel drops this one's SYN until the test accepts the first; its retransmission (1 s on)
// then completes it. The writer's thread sends what was queued as it completes, without the
// main loop's connected(): the hello of a node whose loop is busy (NodeLink's
// ANodeBusyAfterItDialledSaysItsHelloOnTime).
TEST(LinkWriter, AConnectingPeerGetsItsQueuedLinesAsItsConnectCompletes) {
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof a;
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &length), 0);
  ASSERT_EQ(::listen(listener.get(), 0), 0);
  UniqueFd first(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_EQ(::connect(first.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  UniqueFd peer(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  ASSERT_NE(::connect(peer.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(errno, EINPROGRESS);

  LinkWriter writer(std::chrono::seconds(10));  // no heartbeat during the test
  writer.add(0, peer.get(), true, sealer(), true, "hello");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(writer.wants_out(0)) << "the connect completed though its SYN could not be taken";
  EXPECT_EQ(writer.wanting_out(), std::vector<int>{0});

  UniqueFd(::accept(listener.get(), nullptr, nullptr)).reset();  // room for the peer's SYN
  pollfd p{listener.get(), POLLIN, 5000};
  ASSERT_EQ(::poll(&p, 1, 5000), 1) << "the peer's connect did not complete";
  const UniqueFd theirs(::accept(listener.get(), nullptr, nullptr));
  EXPECT_EQ(read_for(theirs.get(), std::chrono::milliseconds(1000)), "hello\n");
  EXPECT_FALSE(writer.wants_out(0));
  EXPECT_TRUE(writer.wanting_out().empty());
}

}  // namespace
}  // namespace hyrun
