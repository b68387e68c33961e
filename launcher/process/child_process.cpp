#include "hyrun/process/child_process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "hyrun/common/descriptor_reserve.hpp"
#include "hyrun/process/unique_fd.hpp"

namespace hyrun {
namespace {

// What the child reports through the status pipe when it cannot exec.
struct ChildFailure {
  int stage;  // 1: setting up, 2: pre-exec hook, 3: exec
  int errnum;
  char message[480];
};

[[noreturn]] void child_fail(int status_fd, int stage, int errnum, const char* message) {
  ChildFailure failure{};
  failure.stage = stage;
  failure.errnum = errnum;
  std::size_t i = 0;
  for (; message && message[i] && i + 1 < sizeof failure.message; ++i) failure.message[i] = message[i];
  failure.message[i] = '\0';
  [[maybe_unused]] ssize_t ignored = ::write(status_fd, &failure, sizeof failure);
  _exit(127);
}

// Moves an fd out of the range [low, high] used as targets, so dup2 cannot clobber it.
int move_above(int fd, int floor) { return fcntl(fd, F_DUPFD_CLOEXEC, floor); }

// Writes `value` in decimal and a NUL at `to` (async-signal-safe: no allocation).
void write_decimal(pid_t value, char* to) {
  char digits[16];
  int n = 0;
  do digits[n++] = static_cast<char>('0' + value % 10);
  while ((value /= 10) > 0 && n < 16);
  while (n > 0) *to++ = digits[--n];
  *to = '\0';
}

// The environment entry "NAME=" of `spec.own_pid_variable`, with room for a pid after it,
// placed in `envp` (replacing an entry of that name); nullptr when there is none.
char* own_pid_entry(const SpawnSpec& spec, std::vector<char*>& envp, std::array<char, 128>& entry) {
  if (spec.own_pid_variable.empty()) return nullptr;
  const std::string prefix = spec.own_pid_variable + "=";
  if (prefix.size() + 16 > entry.size()) throw Error("spawn: the pid variable's name is too long");
  std::memcpy(entry.data(), prefix.data(), prefix.size());
  entry[prefix.size()] = '\0';
  const auto same = std::find_if(envp.begin(), envp.end() - 1,
                                 [&](const char* e) { return std::strncmp(e, prefix.data(), prefix.size()) == 0; });
  if (same != envp.end() - 1)
    *same = entry.data();
  else
    envp.insert(envp.end() - 1, entry.data());
  return entry.data() + prefix.size();
}

[[noreturn]] void run_child(const SpawnSpec& spec, char* const* argv, char* const* envp, int status_fd, pid_t parent,
                            char* own_pid) {
  setpgid(0, 0);
  if (own_pid != nullptr) write_decimal(getpid(), own_pid);
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fail(status_fd, 1, errno, "prctl(PR_SET_PDEATHSIG)");
  if (getppid() != parent) _exit(128 + SIGKILL);  // the parent died before the line above took effect

  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s) sigaction(s, &dfl, nullptr);  // fails harmlessly for SIGKILL/SIGSTOP
  sigset_t empty;
  sigemptyset(&empty);
  sigprocmask(SIG_SETMASK, &empty, nullptr);

  // Collect every source fd above the highest target first, then dup2 into place.
  int highest_target = 2;
  for (const auto& [from, to] : spec.inherited_fds) highest_target = std::max(highest_target, to);
  const int floor = highest_target + 1;
  int in = spec.stdin_fd >= 0 ? spec.stdin_fd : ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (in < 0) child_fail(status_fd, 1, errno, "opening /dev/null for stdin");
  in = move_above(in, floor);
  const int out = move_above(spec.stdout_fd, floor);
  const int err = move_above(spec.stderr_fd, floor);
  if (in < 0 || out < 0 || err < 0) child_fail(status_fd, 1, errno, "duplicating stdio");
  int moved[16];
  const std::size_t count = std::min<std::size_t>(spec.inherited_fds.size(), 16);
  for (std::size_t i = 0; i < count; ++i) {
    moved[i] = move_above(spec.inherited_fds[i].first, floor);
    if (moved[i] < 0) child_fail(status_fd, 1, errno, "duplicating an inherited fd");
  }
  // Every fd but the ones placed below is closed on exec: what hyrun inherited from its
  // parent, other ranks' pipes. The status pipe stays usable until exec.
  if (::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    rlimit limit{};
    getrlimit(RLIMIT_NOFILE, &limit);  // kernels before 5.11: one fcntl per possible fd
    for (rlim_t fd = 3; fd < limit.rlim_cur && fd < (1U << 20); ++fd) fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
  }
  if (spec.open_file_soft_limit != 0) {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && spec.open_file_soft_limit < limit.rlim_cur) {
      limit.rlim_cur = spec.open_file_soft_limit;
      setrlimit(RLIMIT_NOFILE, &limit);
    }
  }
  // dup2 clears close-on-exec on its target.
  if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) child_fail(status_fd, 1, errno, "redirecting stdio");
  for (std::size_t i = 0; i < count; ++i)
    if (dup2(moved[i], spec.inherited_fds[i].second) < 0) child_fail(status_fd, 1, errno, "placing an inherited fd");

  if (spec.pre_exec) {
    char message[400] = {};
    const int rc = spec.pre_exec(message, sizeof message);
    if (rc != 0) child_fail(status_fd, 2, rc, message);
  }
  execvpe(argv[0], argv, envp);
  child_fail(status_fd, 3, errno, nullptr);
}

}  // namespace

pid_t spawn(const SpawnSpec& spec) {
  if (spec.argv.empty()) throw Error("spawn: no program given");
  // Everything the child touches is prepared here: it must not allocate after fork.
  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : spec.environment) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  std::array<char, 128> pid_entry{};
  char* const own_pid = own_pid_entry(spec, envp, pid_entry);
  if (spec.inherited_fds.size() > 16) throw Error("spawn: at most 16 inherited fds");

  Pipe status = make_pipe();
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw SystemError("fork", errno);
  if (pid == 0) {
    status.read.reset();
    run_child(spec, argv.data(), envp.data(), status.write.get(), parent, own_pid);
  }
  setpgid(pid, pid);  // also in the parent, so signals to the group work at once
  status.write.reset();

  ChildFailure failure{};
  ssize_t n;
  do n = ::read(status.read.get(), &failure, sizeof failure);
  while (n < 0 && errno == EINTR);
  if (n == 0) return pid;  // EOF: exec succeeded and closed the pipe

  // The child failed before exec and exits at once; reap it here so it never lingers.
  int ignored;
  while (waitpid(pid, &ignored, 0) < 0 && errno == EINTR) {
  }
  const std::string program = spec.argv[0];
  if (n != static_cast<ssize_t>(sizeof failure))
    throw SpawnError(fmt::format("starting '{}' failed", program), exit_code::kLauncherError);
  if (failure.stage == 1 && (failure.errnum == EMFILE || failure.errnum == ENFILE)) {
    release_descriptor_reserve();
    throw SpawnError(
        fmt::format("preparing '{}' failed: {}: {}", program, failure.message, std::strerror(failure.errnum)),
        exit_code::kLauncherError, failure.errnum);
  }
  switch (failure.stage) {
    case 3:
      throw SpawnError(fmt::format("cannot execute '{}': {}", program, std::strerror(failure.errnum)),
                       failure.errnum == ENOENT ? exit_code::kNotFound : exit_code::kNotExecutable);
    case 2:
      throw SpawnError(fmt::format("preparing '{}' failed: {}", program, failure.message), exit_code::kNotExecutable);
    default:
      throw SpawnError(
          fmt::format("preparing '{}' failed: {}: {}", program, failure.message, std::strerror(failure.errnum)),
          exit_code::kNotExecutable);
  }
}

}  // namespace hyrun
