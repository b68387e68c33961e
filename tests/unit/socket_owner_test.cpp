// Who is at the other end of a loopback TCP connection (the PMIx server's filter): this
// user for a connection of this process; another uid for a child that became another user.
#include "hyrun/pmix/socket_owner.hpp"
#include "hyrun/pmix/socket_holder.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <set>
#include <vector>

#include "hyrun/common/unique_fd.hpp"

namespace hyrun::pmix {
namespace {

struct Loopback {
  UniqueFd listener;
  sockaddr_in address{};
};

Loopback listen_on_loopback() {
  Loopback l;
  l.listener = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  l.address.sin_family = AF_INET;
  l.address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof l.address;
  EXPECT_EQ(::bind(l.listener.get(), reinterpret_cast<sockaddr*>(&l.address), sizeof l.address), 0);
  EXPECT_EQ(::listen(l.listener.get(), 4), 0);
  EXPECT_EQ(::getsockname(l.listener.get(), reinterpret_cast<sockaddr*>(&l.address), &length), 0);
  return l;
}

// A child in a process group of its own that connects to `l` (depth 1) or whose child does
// (depth 2), and then waits; the peer of the connection accepted, and the child. Kill the
// group and reap the child when done (kill_connected).
struct Connected {
  pid_t child = -1;
  std::optional<PeerSocket> peer;
  UniqueFd accepted;
};

Connected fork_connected(const Loopback& l, int depth) {
  int ready[2];
  if (::pipe(ready) != 0) return {};
  const pid_t child = ::fork();
  if (child == 0) {
    ::setpgid(0, 0);                             // a group of its own, killed whole below
    if (depth == 2 && ::fork() != 0) ::pause();  // the child waits; its child connects
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&l.address), sizeof l.address) == 0;
    (void)!::write(ready[1], &ok, 1);
    ::pause();
    ::_exit(0);
  }
  bool ok = false;
  const bool read = ::read(ready[0], &ok, 1) == 1;
  ::close(ready[0]);
  ::close(ready[1]);
  Connected c{child, std::nullopt, {}};
  if (!read || !ok) return c;
  c.accepted = UniqueFd(::accept4(l.listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  c.peer = local_peer(c.accepted.get());
  return c;
}

void kill_connected(pid_t child) {
  ::kill(-child, SIGKILL);
  ::kill(child, SIGKILL);  // before its setpgid, if it came to none
  ::waitpid(child, nullptr, 0);
}

TEST(SocketOwner, AConnectionOfThisProcessIsThisUsers) {
  Loopback l = listen_on_loopback();
  UniqueFd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_EQ(::connect(client.get(), reinterpret_cast<sockaddr*>(&l.address), sizeof l.address), 0);
  UniqueFd accepted(::accept4(l.listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(accepted);
  const auto uid = local_peer_uid(accepted.get());
  ASSERT_TRUE(uid.has_value());
  EXPECT_EQ(*uid, ::getuid());
}

// A client that sends and closes before the accept: its socket is an orphan, which the
// kernel lists with uid 0 and no inode. That is nobody's, not root's: /proc/net/tcp's uid
// column let such a connection of any user pass as root's own (issue 37).
TEST(SocketOwner, AConnectionWhoseOwnerClosedItIsNobodys) {
  Loopback l = listen_on_loopback();
  {
    UniqueFd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    ASSERT_EQ(::connect(client.get(), reinterpret_cast<sockaddr*>(&l.address), sizeof l.address), 0);
    ASSERT_EQ(::write(client.get(), "hello", 5), 5);
  }  // closed: FIN sent
  UniqueFd accepted(::accept4(l.listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(accepted);
  ::usleep(20000);  // our ACK of the FIN: the client's socket is now in FIN_WAIT2
  EXPECT_FALSE(local_peer_uid(accepted.get()).has_value());
}

// The same with IPv6 loopback: the lookup takes either family.
TEST(SocketOwner, AnIpv6ConnectionOfThisProcessIsThisUsers) {
  UniqueFd listener(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  socklen_t length = sizeof a;
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) GTEST_SKIP() << "no IPv6 loopback";
  ASSERT_EQ(::listen(listener.get(), 4), 0);
  ASSERT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &length), 0);
  UniqueFd client(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_EQ(::connect(client.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  UniqueFd accepted(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(accepted);
  EXPECT_EQ(local_peer_uid(accepted.get()), ::getuid());
}

TEST(SocketOwner, AConnectionOfAnotherUserIsTheirs) {
  if (::getuid() != 0) GTEST_SKIP() << "needs root to become another user";
  Loopback l = listen_on_loopback();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  if (child == 0) {  // becomes nobody, connects, waits until the parent is done
    ::close(ready[1]);
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) _exit(2);
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&l.address), sizeof l.address) != 0) _exit(3);
    char c;
    [[maybe_unused]] ssize_t n = ::read(ready[0], &c, 1);
    _exit(0);
  }
  ::close(ready[0]);
  UniqueFd accepted(::accept4(l.listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(accepted);
  const auto uid = local_peer_uid(accepted.get());
  ::close(ready[1]);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  ASSERT_TRUE(uid.has_value());
  EXPECT_EQ(*uid, 65534u);
}

// Whose the peer's socket is: this process's own (not a descendant's), a child's, a child's
// child's (each found under that child); and once the holder has gone, nobody's.
TEST(SocketHolder, OnlyADescendantsSocketIsTheJobs) {
  Loopback l = listen_on_loopback();
  // This process's own connection: the peer is held here, by no descendant.
  UniqueFd own(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_EQ(::connect(own.get(), reinterpret_cast<sockaddr*>(&l.address), sizeof l.address), 0);
  UniqueFd accepted_own(::accept4(l.listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  const auto mine = local_peer(accepted_own.get());
  ASSERT_TRUE(mine);
  EXPECT_TRUE(find_holder(mine->inode).known);
  EXPECT_EQ(find_holder(mine->inode).child, std::nullopt);
  for (const int depth : {1, 2}) {
    const auto c = fork_connected(l, depth);
    EXPECT_TRUE(c.peer) << "depth " << depth;
    if (c.peer) {
      EXPECT_EQ(find_holder(c.peer->inode).child, std::optional<pid_t>(c.child)) << "depth " << depth;
    }
    kill_connected(c.child);
    if (c.peer && depth == 1) {
      EXPECT_EQ(find_holder(c.peer->inode).child, std::nullopt) << "its holder is gone";
    }
  }
}

// Idle children of this process, forked now, killed and reaped at the end of the scope.
struct IdleChildren {
  std::vector<pid_t> pids;
  explicit IdleChildren(int n) {
    for (int i = 0; i < n; ++i) {
      const pid_t idle = ::fork();
      if (idle == 0) {
        ::pause();
        ::_exit(0);
      }
      pids.push_back(idle);
    }
  }
  ~IdleChildren() {
    for (const pid_t idle : pids) {
      ::kill(idle, SIGKILL);
      ::waitpid(idle, nullptr, 0);
    }
  }
  IdleChildren(const IdleChildren&) = delete;
  IdleChildren& operator=(const IdleChildren&) = delete;
};

// Ranks connect about in the order they were started: among the children under which no
// connection was admitted yet, the oldest is looked at first, also when the holder is its
// child, and the newer children's descriptors are not read (newest first, all 8 were).
TEST(SocketHolder, TheOldestChildNotYetAdmittedIsLookedAtFirst) {
  Loopback l = listen_on_loopback();
  for (const int depth : {1, 2}) {
    const auto c = fork_connected(l, depth);
    EXPECT_TRUE(c.peer) << "depth " << depth;
    {
      const IdleChildren newer(8);
      if (c.peer) {
        const auto holder = find_holder(c.peer->inode);
        EXPECT_EQ(holder.child, std::optional<pid_t>(c.child)) << "depth " << depth;
        EXPECT_EQ(holder.looked_at, depth) << "depth " << depth << ": 8 newer children";
      }
    }
    kill_connected(c.child);
  }
}

// A process of the job connects once: the children under which a connection was admitted
// before are looked at last, though older.
TEST(SocketHolder, ChildrenThatConnectedBeforeAreLookedAtLast) {
  Loopback l = listen_on_loopback();
  const IdleChildren older(8);
  const std::set<pid_t> connected_before(older.pids.begin(), older.pids.end());
  for (const int depth : {1, 2}) {
    const auto c = fork_connected(l, depth);
    EXPECT_TRUE(c.peer) << "depth " << depth;
    if (c.peer) {
      const auto holder = find_holder(c.peer->inode, connected_before);
      EXPECT_EQ(holder.child, std::optional<pid_t>(c.child)) << "depth " << depth;
      EXPECT_EQ(holder.looked_at, depth) << "depth " << depth << ": 8 older children that connected before";
      EXPECT_EQ(find_holder(c.peer->inode).looked_at, 8 + depth) << "depth " << depth << ": without them known";
    }
    kill_connected(c.child);
  }
}

}  // namespace
}  // namespace hyrun::pmix
