// hyrun: start the ranks of a job, locally or as one PMIx process per node.
#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "hyrun/common/error.hpp"
#include "hyrun/common/logging.hpp"
#include "hyrun/launcher/cli_options.hpp"
#include "hyrun/launcher/hybrid_mode.hpp"
#include "hyrun/launcher/local_mode.hpp"
#include "hyrun/process/job_events.hpp"
#include "hyrun/process/open_file_limit.hpp"
#include "hyrun/process/signal_events.hpp"

namespace {
// A closed 0, 1 or 2 would be taken by the next fd hyrun opens (a signalfd, a rank's pipe),
// and output meant for it would go there: they are held open on /dev/null instead.
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
}  // namespace

int main(int argc, char** argv) {
  hold_standard_fds();
  hyrun::CommandLine command_line;
  if (const auto code = command_line.parse(argc, argv)) return *code;
  const auto& options = command_line.options();
  try {
    hyrun::init_logging("hyrun", options.log_level);
    // A closed stdout must not kill hyrun while ranks still run; ranks get SIGPIPE back
    // (their dispositions are reset before exec).
    ::signal(SIGPIPE, SIG_IGN);
    // Orphans of a rank's own children are re-parented to hyrun, which reaps them.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    // A few fds per rank: the usual soft limit of 1024 would stop hyrun at ~250 ranks.
    hyrun::raise_open_file_limit();
    hyrun::SignalEvents signals({SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2});
    if (auto pmix = hyrun::connect_pmix_for(options)) return hyrun::run_hybrid(options, signals, *pmix);
    return hyrun::run_local(options, signals);
  } catch (const hyrun::Error& e) {
    hyrun::job_event_line(e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    hyrun::job_event("internal error: {}", e.what());
    return hyrun::exit_code::kLauncherError;
  }
}
