#include "hyrun/process/input_forwarder.hpp"

#include <fcntl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>

namespace hyrun {
namespace {
constexpr std::size_t kPendingLimit = 64 << 10;

// Reading the terminal from a background process group would stop hyrun itself (SIGTTIN).
bool in_terminal_foreground() { return ::tcgetpgrp(0) == ::getpgrp(); }
}  // namespace

int InputForwarder::rank0_stdin() {
  if (!::isatty(0)) return 0;
  Pipe pipe = make_pipe();
  set_nonblocking(pipe.write.get());
  read_end_ = std::move(pipe.read);
  write_end_ = std::move(pipe.write);
  forwarding_ = true;
  return read_end_.get();
}

void InputForwarder::started() { read_end_.reset(); }

void InputForwarder::close() {
  forwarding_ = false;
  read_end_.reset();
  write_end_.reset();
  pending_.clear();
}

void InputForwarder::add_poll_fds(std::vector<pollfd>& fds) const {
  if (!forwarding_) return;
  if (!pending_.empty()) fds.push_back({write_end_.get(), POLLOUT, 0});
  if (!eof_ && pending_.size() < kPendingLimit && in_terminal_foreground()) fds.push_back({0, POLLIN, 0});
}

bool InputForwarder::on_poll(const pollfd& p) {
  if (!forwarding_) return false;
  if (p.fd == 0 && (p.events & POLLIN)) {
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      char buffer[4096];
      // POLLIN said there is data: this read returns without waiting.
      const ssize_t n = ::read(0, buffer, sizeof buffer);
      if (n > 0)
        pending_.append(buffer, static_cast<std::size_t>(n));
      else if (n == 0 || (errno != EINTR && errno != EAGAIN))
        eof_ = true;  // Ctrl-D, a hang-up or an error: rank 0 gets EOF once the rest is written
    }
  } else if (write_end_ && p.fd == write_end_.get() && (p.events & POLLOUT)) {
    if (!(p.revents & (POLLOUT | POLLERR | POLLHUP))) return true;
  } else {
    return false;
  }
  while (!pending_.empty()) {
    const ssize_t n = ::write(write_end_.get(), pending_.data(), pending_.size());
    if (n > 0) {
      pending_.erase(0, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    close();  // EPIPE: rank 0 closed its stdin
    return true;
  }
  if (eof_ && pending_.empty()) write_end_.reset(), forwarding_ = false;
  return true;
}

}  // namespace hyrun
