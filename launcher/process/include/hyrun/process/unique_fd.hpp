#pragma once
// The launcher's file-descriptor helpers; UniqueFd itself lives in hyrun_common.
#include "hyrun/common/unique_fd.hpp"

namespace hyrun {

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

/// pipe2 with O_CLOEXEC (plus `extra_flags`, e.g. O_NONBLOCK on both ends); throws SystemError.
Pipe make_pipe(int extra_flags = 0);

/// Sets O_NONBLOCK on `fd`; throws SystemError.
void set_nonblocking(int fd);

}  // namespace hyrun
