#pragma once
// One of hyrun's own output streams (stdout or stderr) written without ever blocking, so
// that a reader that stalls (`hyrun ... | sleep 30`) cannot stop the poll loop from
// honouring signals, and a reader that goes away (`| head -1`) is noticed.
//
// The fd is shared with hyrun's parent (a shell, a terminal), so O_NONBLOCK is never set
// on it: a pipe, FIFO or terminal is reopened through /proc/self/fd as a new open file
// description that is non-blocking; a socket is written with MSG_DONTWAIT; a regular file
// is written directly (it does not stall). If reopening fails, writes wait for POLLOUT
// and are at most PIPE_BUF bytes, which a pipe then takes without blocking.
// Expects SIGPIPE to be ignored (hyrun's main does), so that a gone reader shows as EPIPE.
// Thread-safe: hyrun's own log lines (OwnStderr) come from any thread.
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "hyrun/process/unique_fd.hpp"

namespace hyrun {

class OutputDestination {
 public:
  explicit OutputDestination(int fd);

  /// Queues `text` and writes what the reader takes now; behind bytes still queued, it waits
  /// with them for on_writable() (a write now would fail again, once a line).
  void write(std::string_view text);
  /// Writes more of the queue; call when poll reports POLLOUT (or POLLERR/POLLHUP) on fd().
  void on_writable();

  /// Drops what is queued, but for the rest of a line the reader has begun (at most
  /// kKeptLine bytes of it, then ended with a newline).
  void drop_queued();
  static constexpr std::size_t kKeptLine = 4096;

  int fd() const { return fd_; }
  /// Whether poll should wait for POLLOUT: there is queued output.
  bool wants_writable() const;
  std::size_t pending_bytes() const;
  /// The reader is gone (EPIPE) or the fd failed: everything written since is dropped.
  /// (An fd that was closed when hyrun started is not broken: its output is dropped quietly.)
  bool broken() const;

 private:
  enum class Mode { kNonBlocking, kSocket, kDirect, kGated };
  void flush();  // with mutex_ held

  mutable std::mutex mutex_;
  int original_;
  int fd_;
  UniqueFd reopened_;
  Mode mode_ = Mode::kDirect;
  std::string pending_;
  std::size_t offset_ = 0;
  bool broken_ = false;
  bool discard_ = false;   // the fd was closed when hyrun started
  bool mid_line_ = false;  // the last byte written was not a newline: the reader is in a line
};

/// The process's own stdout (1) or stderr (2), one object for both when they are one file
/// (`2>&1`): two queues would each write what the file takes and splice one stream's lines
/// into the middle of the other's once the reader falls behind.
std::shared_ptr<OutputDestination> launcher_output(int fd);

}  // namespace hyrun
