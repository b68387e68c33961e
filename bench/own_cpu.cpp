// For bench/simulated-nodes.sh --reference: runs a command and appends to FILE one line,
// "<PMIX_RANK> <CPU ms>", the CPU time of the command's own process (user + system, its
// children not counted), read when it has ended and before it is reaped. A build whose
// --timings prints no CPU (the star of 7ebfc1b) is measured this way, from outside.
//
//   own-cpu FILE -- COMMAND [ARGS...]
// Exits as the command did (128 + the signal that ended it). SIGTERM, SIGINT and SIGHUP are
// passed on to the command, so that whoever stops this process stops the command.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

extern char** environ;

namespace {

volatile sig_atomic_t child = 0;

void pass_on(int signal) {
  if (child > 0) ::kill(child, signal);
}

// utime and stime, the 14th and 15th fields of /proc/PID/stat, in milliseconds; -1 if unread.
double own_cpu_ms(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  const std::string stat((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const auto end_of_name = stat.rfind(')');  // the name may hold spaces and parentheses
  if (end_of_name == std::string::npos) return -1;
  std::istringstream fields(stat.substr(end_of_name + 2));
  std::string field;
  for (int i = 3; i <= 13 && fields >> field; ++i) {
  }
  unsigned long long user = 0, system = 0;
  if (!(fields >> user >> system)) return -1;
  return 1000.0 * static_cast<double>(user + system) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || std::strcmp(argv[2], "--") != 0) {
    std::fprintf(stderr, "usage: own-cpu FILE -- COMMAND [ARGS...]\n");
    return 2;
  }
  struct sigaction action {};
  action.sa_handler = pass_on;
  for (const int signal : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(signal, &action, nullptr);
  pid_t pid = 0;
  if (const int error = ::posix_spawnp(&pid, argv[3], nullptr, nullptr, argv + 3, environ); error != 0) {
    std::fprintf(stderr, "own-cpu: cannot start '%s': %s\n", argv[3], std::strerror(error));
    return 127;
  }
  child = pid;
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) != 0)
    if (errno != EINTR) {
      std::perror("own-cpu: waitid");
      return 1;
    }
  const double cpu = own_cpu_ms(pid);  // a zombie's stat still holds its times
  int status = 0;
  ::waitpid(pid, &status, 0);
  const char* rank = std::getenv("PMIX_RANK");
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.1f", cpu);
  const std::string line = std::string(rank != nullptr ? rank : "-") + " " + ms + "\n";
  const int out = ::open(argv[1], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (out < 0 || ::write(out, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    std::fprintf(stderr, "own-cpu: cannot append to '%s': %s\n", argv[1], std::strerror(errno));
    return 1;
  }
  ::close(out);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
