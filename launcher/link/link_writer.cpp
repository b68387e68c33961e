#include "hyrun/link/link_writer.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>

#include <cerrno>

namespace hyrun {
namespace {
constexpr std::size_t kMaxPending = 4096;  // a peer that takes nothing: no more heartbeats for it
// Messages (a PMIx fence's data) are dropped only past this: a peer that took none of them.
constexpr std::size_t kMaxPendingMessages = std::size_t{256} << 20;
}  // namespace

LinkWriter::LinkWriter(std::chrono::milliseconds heartbeat) {
  // The thread takes no signal meant for hyrun (its signal fd reads them on the main thread).
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  try {
    thread_ = std::thread([this, heartbeat] { run(heartbeat); });
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    throw;
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

LinkWriter::~LinkWriter() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void LinkWriter::add(int task, int fd, bool connecting, LinkSeal seal) {
  std::lock_guard lock(mutex_);
  Out& out = peers_[task];
  out.fd = fd;
  out.connecting = connecting;
  out.beats = true;
  out.seal = std::move(seal);
}

void LinkWriter::connected(int task) {
  std::lock_guard lock(mutex_);
  if (auto it = peers_.find(task); it != peers_.end()) {
    it->second.connecting = false;
    flush_locked(it->second);
  }
}

void LinkWriter::remove(int task) {
  std::lock_guard lock(mutex_);
  peers_.erase(task);
}

void LinkWriter::send(int task, std::string_view body) {
  std::lock_guard lock(mutex_);
  auto it = peers_.find(task);
  if (it == peers_.end() || it->second.pending.size() > kMaxPendingMessages) return;
  queue_locked(it->second, it->second.seal->seal(body));
  flush_locked(it->second);
}

void LinkWriter::send_hello(int task, std::string_view line) {
  std::lock_guard lock(mutex_);
  auto it = peers_.find(task);
  if (it == peers_.end()) return;
  queue_locked(it->second, line);
  flush_locked(it->second);
}

void LinkWriter::queue_locked(Out& out, std::string_view line) {
  out.pending.append(line);
  out.pending += '\n';
}

void LinkWriter::flush(int task) {
  std::lock_guard lock(mutex_);
  if (auto it = peers_.find(task); it != peers_.end()) flush_locked(it->second);
}

bool LinkWriter::wants_out(int task) const {
  std::lock_guard lock(mutex_);
  const auto it = peers_.find(task);
  return it != peers_.end() && (it->second.connecting || !it->second.pending.empty());
}

void LinkWriter::stop_heartbeats(int task) {
  std::lock_guard lock(mutex_);
  if (auto it = peers_.find(task); it != peers_.end()) it->second.beats = false;
}

void LinkWriter::flush_locked(Out& out) {
  while (!out.pending.empty() && !out.connecting) {
    const ssize_t n = ::send(out.fd, out.pending.data(), out.pending.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      out.pending.erase(0, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return;  // EAGAIN: later; an error: the reading side reports the loss
  }
}

void LinkWriter::check_connected_locked(Out& out) {
  // Writable without an error: connected. An error is left for the main loop, which reads
  // it (SO_ERROR) and reports why the connect failed.
  pollfd p{out.fd, POLLOUT, 0};
  if (::poll(&p, 1, 0) == 1 && (p.revents & POLLOUT) && !(p.revents & (POLLERR | POLLHUP))) out.connecting = false;
}

void LinkWriter::run(std::chrono::milliseconds heartbeat) {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, heartbeat, [this] { return stopping_; });
    if (stopping_) return;
    for (auto& [task, out] : peers_) {
      if (out.connecting) check_connected_locked(out);
      if (out.connecting || !out.beats) continue;
      if (out.pending.size() <= kMaxPending) queue_locked(out, out.seal->seal(format_link(LinkAlive{})));
      flush_locked(out);
    }
  }
}

}  // namespace hyrun
