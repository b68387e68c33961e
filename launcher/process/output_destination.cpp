#include "hyrun/process/output_destination.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>

namespace hyrun {

OutputDestination::OutputDestination(int fd) : original_(fd), fd_(fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    discard_ = true;  // hyrun was started with it closed: output is dropped, as before a reader existed
    return;
  }
  if (S_ISSOCK(st.st_mode)) {
    mode_ = Mode::kSocket;
  } else if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
    const int reopened =
        ::open(fmt::format("/proc/self/fd/{}", fd).c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (reopened >= 0) {
      reopened_.reset(reopened);
      fd_ = reopened;
      mode_ = Mode::kNonBlocking;
    } else if (errno == ENXIO && S_ISFIFO(st.st_mode)) {
      broken_ = true;  // a FIFO without a reader
    } else {
      mode_ = Mode::kGated;
    }
  }
}

void OutputDestination::write(std::string_view text) {
  std::lock_guard lock(mutex_);
  if (broken_ || discard_ || text.empty()) return;
  // Bytes still queued mean the reader is behind: this text waits with them for the loop's
  // POLLOUT (on_writable), rather than a write that fails again for every line (a round of
  // 64 flooding ranks' lines held a signal for seconds).
  const bool behind = offset_ < pending_.size();
  if (offset_ == pending_.size() || offset_ > (1u << 20)) {
    pending_.erase(0, offset_);  // drop what was written, so the queue holds only what was not
    offset_ = 0;
  }
  pending_.append(text);
  if (mode_ != Mode::kGated && !behind) flush();
}

void OutputDestination::on_writable() {
  std::lock_guard lock(mutex_);
  flush();
}

void OutputDestination::drop_queued() {
  std::lock_guard lock(mutex_);
  std::size_t keep = offset_;
  if (mid_line_ && offset_ < pending_.size()) {
    // The rest of the line the reader began, ended, but no more than kKeptLine of it.
    const auto newline = pending_.find('\n', offset_);
    keep = newline == std::string::npos ? pending_.size() : newline + 1;
    if (keep - offset_ > kKeptLine) {
      keep = offset_ + kKeptLine;
      pending_.resize(keep);
      pending_ += '\n';
      return;
    }
  }
  pending_.resize(keep);
}

bool OutputDestination::wants_writable() const {
  std::lock_guard lock(mutex_);
  return !broken_ && pending_.size() > offset_;
}

std::size_t OutputDestination::pending_bytes() const {
  std::lock_guard lock(mutex_);
  return broken_ ? 0 : pending_.size() - offset_;
}

bool OutputDestination::broken() const {
  std::lock_guard lock(mutex_);
  return broken_;
}

void OutputDestination::flush() {
  while (!broken_ && offset_ < pending_.size()) {
    std::size_t size = pending_.size() - offset_;
    if (mode_ == Mode::kGated) {
      // One bounded write per POLLOUT, asked here under the lock: another thread's line
      // (OwnStderr) may have taken the room a caller's POLLOUT saw, and this fd blocks.
      pollfd p{fd_, POLLOUT, 0};
      if (::poll(&p, 1, 0) <= 0) return;
      size = std::min<std::size_t>(size, PIPE_BUF);
    }
    const char* data = pending_.data() + offset_;
    const ssize_t n =
        mode_ == Mode::kSocket ? ::send(fd_, data, size, MSG_DONTWAIT | MSG_NOSIGNAL) : ::write(fd_, data, size);
    if (n > 0) {
      offset_ += static_cast<std::size_t>(n);
      mid_line_ = pending_[offset_ - 1] != '\n';
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    broken_ = true;  // EPIPE: the reader is gone; other errors: nothing more can be written
    pending_.clear();
    offset_ = 0;
    return;
  }
  if (offset_ == pending_.size()) {
    pending_.clear();
    offset_ = 0;
  }
}

std::shared_ptr<OutputDestination> launcher_output(int fd) {
  static const auto outputs = [] {
    std::array<std::shared_ptr<OutputDestination>, 2> made;
    made[0] = std::make_shared<OutputDestination>(1);
    struct stat out {
    }, err{};
    const bool same =
        ::fstat(1, &out) == 0 && ::fstat(2, &err) == 0 && out.st_dev == err.st_dev && out.st_ino == err.st_ino;
    made[1] = same ? made[0] : std::make_shared<OutputDestination>(2);
    return made;
  }();
  return outputs.at(static_cast<std::size_t>(fd - 1));
}

}  // namespace hyrun
