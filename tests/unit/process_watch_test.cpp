// ProcessIdentity (who a process is, encoded for the join and the address table) and the
// DeathNotices watches built on it: a rank learns at once that a process of its host ended,
// whichever hyrun started it. Real processes (fork) and real pidfds.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "death_notices.hpp"
#include "hyrun/common/error.hpp"
#include "hyrun/common/process_identity.hpp"

namespace hyrun {
namespace {

using namespace std::chrono_literals;

// A child that waits until it is killed; reaped (killed first) when this ends.
class Child {
 public:
  Child() : pid_(::fork()) {
    if (pid_ == 0) {
      for (;;) ::pause();
    }
  }
  ~Child() {
    ::kill(pid_, SIGKILL);
    reap();
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  pid_t pid() const { return pid_; }
  void kill_and_reap() {
    ::kill(pid_, SIGKILL);
    reap();
  }
  ProcessIdentity identity() const {
    ProcessIdentity id = ProcessIdentity::own();
    id.pid = static_cast<uint32_t>(pid_);
    id.start_ticks = ProcessIdentity::start_ticks_of(id.pid);
    return id;
  }

 private:
  void reap() {
    int status;
    while (!reaped_ && ::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
  }
  pid_t pid_;
  bool reaped_ = false;
};

bool readable(const UniqueFd& fd, int timeout_ms) {
  pollfd p{fd.get(), POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1;
}

TEST(ProcessIdentity, OwnIsKnownAndOnTheSameHostAsItself) {
  const ProcessIdentity own = ProcessIdentity::own();
  ASSERT_TRUE(own.known());
  EXPECT_EQ(own.pid, static_cast<uint32_t>(::getpid()));
  EXPECT_NE(own.start_ticks, 0u);
  EXPECT_EQ(own.start_ticks, ProcessIdentity::start_ticks_of(own.pid));
  EXPECT_TRUE(own.same_host(own));
  EXPECT_FALSE(own.same_host(ProcessIdentity{}));
  ProcessIdentity other_boot = own;
  other_boot.boot_id[3] ^= std::byte{1};
  EXPECT_FALSE(own.same_host(other_boot));
  ProcessIdentity other_namespace = own;
  ++other_namespace.pid_namespace;
  EXPECT_FALSE(own.same_host(other_namespace));
}

TEST(ProcessIdentity, EncodesAndDecodesEveryField) {
  Child child;
  const ProcessIdentity id = child.identity();
  EXPECT_EQ(ProcessIdentity::decode(id.encode()), id);
  EXPECT_TRUE(ProcessIdentity{}.encode().empty());
  EXPECT_FALSE(ProcessIdentity::decode({}).known());
  auto bytes = id.encode();
  bytes.push_back(std::byte{0});
  EXPECT_THROW(ProcessIdentity::decode(bytes), Error);
}

TEST(ProcessIdentity, AWatchFiresWhenTheProcessEnds) {
  Child child;
  const UniqueFd watch = child.identity().watch();
  ASSERT_TRUE(watch);
  EXPECT_FALSE(readable(watch, 0));
  ::kill(child.pid(), SIGKILL);
  EXPECT_TRUE(readable(watch, 60000));  // a limit, not a measure: it fires at the kill
}

TEST(ProcessIdentity, AnEndedOrReplacedProcessHasNoWatch) {
  Child ended;
  const ProcessIdentity gone = ended.identity();
  ended.kill_and_reap();
  EXPECT_FALSE(gone.watch());
  Child running;
  ProcessIdentity reused = running.identity();  // its pid, another start: another process
  ++reused.start_ticks;
  EXPECT_FALSE(reused.watch());
}

// The control channel's hyrun end, as a socket pair: DeathNotices asks for notices on it.
struct Channel {
  Channel() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) throw SystemError("socketpair", errno);
    rank.reset(fds[0]);
    hyrun.reset(fds[1]);
  }
  UniqueFd rank, hyrun;
};

bool becomes_dead(const DeathNotices& notices, int rank) {
  for (auto until = std::chrono::steady_clock::now() + 60s; std::chrono::steady_clock::now() < until;) {
    if (notices.dead(rank)) return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

TEST(DeathNoticesWatch, AWatchedProcessOfThisHostIsDeadWhenItEnds) {
  Channel channel;
  DeathNotices notices(channel.rank.get(), 4, 0);
  Child two, three;
  notices.watch(2, two.identity());
  notices.watch(3, three.identity());
  notices.watch(0, ProcessIdentity::own());  // its own rank: never watched
  two.kill_and_reap();
  EXPECT_TRUE(becomes_dead(notices, 2));
  EXPECT_FALSE(notices.dead(3));
  EXPECT_FALSE(notices.dead(1));
  EXPECT_FALSE(notices.dead(0));
}

TEST(DeathNoticesWatch, AProcessThatEndedBeforeTheWatchIsDeadAtOnce) {
  Channel channel;
  DeathNotices notices(channel.rank.get(), 3, 0);
  Child one;
  const ProcessIdentity gone = one.identity();
  one.kill_and_reap();
  notices.watch(1, gone);
  EXPECT_TRUE(notices.dead(1));
}

TEST(DeathNoticesWatch, AProcessOfAnotherHostIsNotWatched) {
  Channel channel;
  DeathNotices notices(channel.rank.get(), 3, 0);
  Child one;
  ProcessIdentity elsewhere = one.identity();
  elsewhere.boot_id[0] ^= std::byte{0x80};  // another host: its pid means nothing here
  notices.watch(1, elsewhere);
  notices.watch(2, ProcessIdentity{});  // unknown: nothing to watch
  one.kill_and_reap();
  EXPECT_FALSE(notices.dead(1));
  EXPECT_FALSE(notices.dead(2));
}

// Out of descriptors, a process cannot be watched: that must never read as its death.
TEST(DeathNoticesWatch, AProcessThatCannotBeWatchedIsNotTakenForDead) {
#ifdef __SANITIZE_ADDRESS__
  GTEST_SKIP() << "starves the process of descriptors, which the sanitizer runtime needs (it hangs)";
#endif
  Channel channel;
  DeathNotices notices(channel.rank.get(), 3, 0);
  Child one;
  const ProcessIdentity identity = one.identity();
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  const int lowest_free = ::dup(0);
  ASSERT_GE(lowest_free, 0);
  ::close(lowest_free);
  rlimit tight = saved;
  tight.rlim_cur = static_cast<rlim_t>(lowest_free);  // no new descriptor from here on
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &tight), 0);
  EXPECT_THROW((void)identity.watch(), SystemError);
  notices.watch(1, identity);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_FALSE(notices.dead(1));
}

TEST(DeathNoticesWatch, ANewProcessOfTheRankIsNotMarkedByTheOldOnesEnd) {
  Channel channel;
  DeathNotices notices(channel.rank.get(), 4, 0);
  Child old_process, new_process, other;
  notices.watch(2, old_process.identity());
  notices.forget(2);
  notices.watch(2, new_process.identity());  // the rank's new process
  notices.watch(3, other.identity());
  old_process.kill_and_reap();
  // Once rank 3's end is seen, the reader has passed any moment at which the old
  // process's end could have been taken for rank 2's.
  other.kill_and_reap();
  ASSERT_TRUE(becomes_dead(notices, 3));
  EXPECT_FALSE(notices.dead(2));
  new_process.kill_and_reap();
  EXPECT_TRUE(becomes_dead(notices, 2));
}

}  // namespace
}  // namespace hyrun
