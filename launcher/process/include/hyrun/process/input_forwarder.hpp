#pragma once
// Gives rank 0 hyrun's stdin when that is a terminal, through a pipe that hyrun fills.
//
// Why: each rank runs in its own process group, which is never the terminal's foreground
// group, so a rank reading the terminal itself would be stopped by SIGTTIN for good.
// Like mpirun (whose --stdin default is rank 0), hyrun reads the terminal and forwards
// what it reads to rank 0; the other ranks get /dev/null. A stdin that is not a terminal
// (a file, a pipe) is handed to rank 0 directly, as before: nothing stops a reader there.
// hyrun reads the terminal only while it is in the foreground, never blocks on it, and
// holds at most 64 KiB that rank 0 has not read yet.
#include <poll.h>

#include <string>
#include <vector>

#include "hyrun/process/unique_fd.hpp"

namespace hyrun {

class InputForwarder {
 public:
  /// The fd to give rank 0 as its stdin: 0 itself, or the read end of the forwarding pipe
  /// (owned here; the caller only duplicates it into the child). Call once.
  int rank0_stdin();
  /// Rank 0 has its copy of the read end: ours is closed, so that its end shows as EPIPE here.
  void started();

  void add_poll_fds(std::vector<pollfd>& fds) const;
  /// Handles one polled entry; false when it is not one of ours.
  bool on_poll(const pollfd& p);
  /// Rank 0 has ended: nothing is forwarded any more.
  void close();

 private:
  bool forwarding_ = false;
  bool eof_ = false;
  UniqueFd read_end_;   // until rank 0 is started
  UniqueFd write_end_;  // non-blocking
  std::string pending_;
};

}  // namespace hyrun
