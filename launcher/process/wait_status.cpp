#include "hyrun/process/wait_status.hpp"

#include <fmt/format.h>
#include <sys/wait.h>

#include <cstring>

namespace hyrun {

std::string signal_name(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return abbrev ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", signal);
}

bool ProcessEnd::failed() const { return !(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0); }

int ProcessEnd::exit_code() const {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

std::string ProcessEnd::describe() const {
  if (WIFEXITED(wait_status))
    return WEXITSTATUS(wait_status) == 0 ? "exited normally"
                                         : fmt::format("exited with code {}", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    return fmt::format("was killed by signal {} ({}){}", sig, signal_name(sig),
                       WCOREDUMP(wait_status) ? ", core dumped" : "");
  }
  return fmt::format("ended with wait status {:#x}", wait_status);
}

}  // namespace hyrun
