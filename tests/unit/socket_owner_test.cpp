// Who is at the other end of a loopback TCP connection (the PMIx server's filter): this
// user for a connection of this process; another uid for a child that became another user.
#include "hyrun/pmix/socket_owner.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

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

TEST(SocketOwner, SpellsAnAddressAsTheKernelListsIt) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(8080);
  EXPECT_EQ(proc_net_address(&a), "0100007F:1F90");
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

}  // namespace
}  // namespace hyrun::pmix
