#include "hyrun/process/launcher_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>

#include "hyrun/process/open_file_limit.hpp"

namespace hyrun {

void hold_standard_fds() {
  for (int fd = 0; fd <= 2; ++fd)
    if (::fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      const int null = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
      if (null >= 0 && null != fd) {
        ::dup2(null, fd);
        ::close(null);
      }
    }
}

SignalEvents prepare_launcher_process() {
  hold_standard_fds();
  ::signal(SIGPIPE, SIG_IGN);
  // A file size limit (ulimit -f) reached while writing --output-filename files must be an
  // error hyrun reports (EFBIG), not a signal that kills it. Ranks get SIG_DFL back.
  ::signal(SIGXFSZ, SIG_IGN);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  // The usual soft limit of 1024 would stop a launcher at ~250 ranks.
  raise_open_file_limit();
  return SignalEvents({SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2});
}

}  // namespace hyrun
