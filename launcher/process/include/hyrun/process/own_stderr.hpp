#pragma once
// hyrun's own lines on its stderr outside the poll loop: diagnostics (spdlog, from any thread)
// and the job events said before and after the loop (main's error line). A reader of stderr
// that stalls must not block hyrun (it would hold SIGTERM, or hyrun's exit, for as long as the
// reader sleeps), so they join the ranks' stderr in hyrun's non-blocking queue
// (launcher_output(2)), in order, and between whole lines of the ranks (not within the pieces
// of an over-long or unfinished line that hyrun forwards unlabelled). The rank supervisor's
// loop writes that queue as the reader takes it; otherwise a line goes out with the next one,
// or at exit: flush() waits at most kExitLimit in all (2 s on an abort, which skips
// destructors). A line that finds the queue past kQueueLimit is dropped and counted; the
// count is said with the next line, or at exit.
#include <spdlog/sinks/sink.h>
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string_view>

#include "hyrun/process/output_destination.hpp"

namespace hyrun {

class OwnStderr {
 public:
  /// Above the ranks' share of the queue (OutputForwarder's backpressure mark and round budget).
  static constexpr std::size_t kQueueLimit = std::size_t{4} << 20;
  /// At exit, what the reader has not taken within this is dropped.
  static constexpr std::chrono::seconds kExitLimit{5};

  OwnStderr();
  /// Flushes (at the process's exit, when the last owner lets go).
  ~OwnStderr();
  OwnStderr(const OwnStderr&) = delete;
  OwnStderr& operator=(const OwnStderr&) = delete;

  /// Queues one line (ending in '\n') and writes what the reader takes now. Thread-safe. In a
  /// forked child, writes the line to fd 2 itself, blocking.
  void write(std::string_view line);
  /// Writes what is queued, waiting for the reader at most `limit` in all.
  void flush(std::chrono::milliseconds limit = kExitLimit);

 private:
  void write_now();    // what the reader takes without waiting
  void say_dropped();  // queues the count of dropped lines, if any (mutex_ held)

  std::mutex mutex_;  // guards dropped_
  std::shared_ptr<OutputDestination> destination_;
  std::size_t dropped_ = 0;
  pid_t owner_;  // the process whose queue it is (not a forked helper)
};

/// The process's one OwnStderr (fd 2). Shared, so that the log sink keeps it while spdlog does.
std::shared_ptr<OwnStderr> own_stderr();
/// An spdlog sink that writes through own_stderr().
std::shared_ptr<spdlog::sinks::sink> own_stderr_log_sink();

}  // namespace hyrun
