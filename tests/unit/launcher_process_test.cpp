// The process set-up every launcher shares (hyrun, ep-elastic), checked in a child process so
// that this test process keeps its own dispositions and mask.
#include "hyrun/process/launcher_process.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

namespace hyrun {
namespace {

// Runs `body` in a child; its exit code is the number of the first check that failed (0: all held).
int in_child(int (*body)()) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

bool is_dev_null(int fd) {
  struct stat seen {
  }, null{};
  return ::fstat(fd, &seen) == 0 && ::stat("/dev/null", &null) == 0 && seen.st_rdev == null.st_rdev &&
         S_ISCHR(seen.st_mode);
}

TEST(LauncherProcess, AClosedStandardFdIsHeldOnDevNullSoThatNoLaterFdTakesItsNumber) {
  EXPECT_EQ(in_child([] {
              ::close(1);
              hold_standard_fds();
              if (!is_dev_null(1)) return 1;
              const int next = ::open("/dev/null", O_RDONLY);
              return next > 2 ? 0 : 2;
            }),
            0);
}

TEST(LauncherProcess, PreparesSignalsSubreaperAndDescriptors) {
  EXPECT_EQ(in_child([] {
              ::close(2);
              SignalEvents signals = prepare_launcher_process();
              if (!is_dev_null(2)) return 1;
              struct sigaction pipe {};
              if (::sigaction(SIGPIPE, nullptr, &pipe) != 0 || pipe.sa_handler != SIG_IGN) return 2;
              int subreaper = 0;
              if (::prctl(PR_GET_CHILD_SUBREAPER, &subreaper) != 0 || subreaper != 1) return 3;
              sigset_t blocked;
              ::sigprocmask(SIG_BLOCK, nullptr, &blocked);
              for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2})
                if (!::sigismember(&blocked, sig)) return 4;
              if (signals.fd() < 0) return 5;
              ::raise(SIGUSR1);  // blocked: it arrives as an event, not as a death
              const auto events = signals.drain();
              return events.size() == 1 && events[0] == SIGUSR1 ? 0 : 6;
            }),
            0);
}

}  // namespace
}  // namespace hyrun
