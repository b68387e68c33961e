// The reference for bench/launch.sh: start N copies of a program with plain fork/exec
// (posix_spawn) and wait for all of them, nothing else.
#include <spawn.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

extern char** environ;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: fork-exec-baseline N program [args...]\n");
    return 2;
  }
  const int n = std::atoi(argv[1]);
  std::vector<pid_t> pids(n);
  for (int i = 0; i < n; ++i)
    if (posix_spawnp(&pids[i], argv[2], nullptr, nullptr, argv + 2, environ) != 0) {
      std::perror("posix_spawnp");
      return 1;
    }
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  return failed ? 1 : 0;
}
