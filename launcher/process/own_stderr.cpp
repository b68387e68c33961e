#include "hyrun/process/own_stderr.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <spdlog/sinks/base_sink.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace hyrun {

OwnStderr::OwnStderr() : destination_(launcher_output(2)), owner_(::getpid()) {}

OwnStderr::~OwnStderr() { flush(); }

void OwnStderr::write(std::string_view line) {
  if (::getpid() != owner_) {
    // A forked helper (hyrun's PMIx client): the queue it inherited is its parent's to write,
    // and a lock may have been held by another thread at the fork. It writes as it did before.
    for (std::size_t done = 0; done < line.size();) {
      const ssize_t n = ::write(2, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      done += static_cast<std::size_t>(n);
    }
    return;
  }
  std::lock_guard lock(mutex_);
  if (destination_->pending_bytes() + line.size() > kQueueLimit) {
    ++dropped_;
    return;
  }
  say_dropped();
  destination_->write(line);
  write_now();
}

void OwnStderr::say_dropped() {
  if (dropped_ == 0) return;
  destination_->write(
      fmt::format("hyrun: {} line(s) of hyrun's own were dropped: the reader of its stderr "
                  "did not take them\n",
                  dropped_));
  dropped_ = 0;
}

void OwnStderr::write_now() {
  // A destination written only after POLLOUT (OutputDestination's gated mode) asks poll itself;
  // the others have written what the reader takes already.
  if (destination_->wants_writable()) destination_->on_writable();
}

void OwnStderr::flush(std::chrono::milliseconds limit) {
  if (::getpid() != owner_) return;  // a forked child's copy of the queue is its parent's
  {
    std::lock_guard lock(mutex_);
    say_dropped();
  }
  const auto until = std::chrono::steady_clock::now() + limit;
  while (destination_->wants_writable()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return;  // a stalled reader: the rest is dropped
    pollfd p{destination_->fd(), POLLOUT, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return;
    destination_->on_writable();
  }
}

std::shared_ptr<OwnStderr> own_stderr() {
  static const auto instance = std::make_shared<OwnStderr>();
  return instance;
}

namespace {

class OwnStderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  OwnStderrSink() : out_(own_stderr()) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& message) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(message, formatted);
    out_->write({formatted.data(), formatted.size()});
  }
  void flush_() override {}  // every line is written (or queued) at once; exit flushes the queue

 private:
  std::shared_ptr<OwnStderr> out_;
};

}  // namespace

std::shared_ptr<spdlog::sinks::sink> own_stderr_log_sink() { return std::make_shared<OwnStderrSink>(); }

}  // namespace hyrun
