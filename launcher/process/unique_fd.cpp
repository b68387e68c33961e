#include "hyrun/process/unique_fd.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "hyrun/common/error.hpp"

namespace hyrun {

Pipe make_pipe(int extra_flags) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | extra_flags) != 0) throw SystemError("creating a pipe", errno);
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

void set_nonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) throw SystemError("setting O_NONBLOCK", errno);
}

}  // namespace hyrun
