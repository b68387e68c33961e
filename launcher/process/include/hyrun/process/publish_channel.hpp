#pragma once
// Rank 0's publish pipe (docs/architecture.md): the worker library writes its hello line
// when it is loaded, then "hyrun-root v1 <hex address>". hyrun holds the read end,
// non-blocking, in the supervisor's poll loop.
#include <optional>
#include <string>

#include "hyrun/process/unique_fd.hpp"

namespace hyrun {

class PublishChannel {
 public:
  /// The fd number rank 0 finds the pipe at (HYRUN_PUBLISH_FD).
  static constexpr int kChildFd = 3;

  /// Opens the pipe; returns the write end for rank 0 (to be placed at kChildFd).
  /// Throws SystemError.
  UniqueFd open();

  /// The read end while it is open (for poll), else -1.
  int fd() const { return read_ ? read_.get() : -1; }
  /// Reads what is there without blocking. Throws Error when rank 0 wrote something
  /// other than a hello or an address line, or 64 KiB without a newline; the pipe is
  /// closed then, as it is once the address came or rank 0 closed its end.
  void on_readable();

  bool said_hello() const { return said_hello_; }
  /// The address rank 0 published (hex), once it did.
  const std::optional<std::string>& address() const { return address_; }
  /// True when rank 0 closed its end (or exited) without publishing.
  bool closed_early() const { return closed_early_; }

 private:
  UniqueFd read_;
  std::string buffer_;
  std::optional<std::string> address_;
  bool said_hello_ = false;
  bool closed_early_ = false;
};

}  // namespace hyrun
