#pragma once
// hyrun's own limit on open files. hyrun holds a few fds per rank it starts (output
// pipes, control socket, PMI socket, pidfd), so the common soft limit of 1024 would stop it at a few
// hundred ranks: it raises its soft limit to the hard limit at start, and gives ranks the
// soft limit it was started with (programs using select() rely on fds below 1024).
#include <sys/resource.h>

#include <string>

namespace hyrun {

/// Raises the soft RLIMIT_NOFILE to the hard limit (quietly keeps it when that fails), then
/// holds two descriptors in reserve for the path that runs out (descriptor_reserve.hpp).
void raise_open_file_limit();
/// The soft limit hyrun was started with; what ranks get.
rlim_t original_open_file_soft_limit();
/// "out of file descriptors starting rank 5: ..." naming the limit and the remedy.
std::string describe_fd_exhaustion(int global_rank);

}  // namespace hyrun
