#include "hyrun/link/link_writer.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cerrno>

namespace hyrun {
namespace {
constexpr std::size_t kMaxPending = 4096;  // a peer that takes nothing: no more heartbeats for it
// Pieces handed to one sendmsg.
constexpr std::size_t kMaxIov = 64;
// How often the thread looks at a connect in progress. The hello queued at the dial leaves as
// the connect completes: a node's main loop may be away for seconds (starting its ranks on a
// loaded machine), past the 5 s in which the root awaits a hello, and waiting for the next
// heartbeat (up to 1 s) left too little of those 5 s at a load of 1 500 on 2 cores.
constexpr std::chrono::milliseconds kConnectLook{20};
}  // namespace

LinkWriter::LinkWriter(std::chrono::milliseconds heartbeat, std::size_t max_queued) : max_queued_(max_queued) {
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

void LinkWriter::add(int task, int fd, bool connecting, LinkSeal seal, bool beats, std::string_view hello) {
  {
    std::lock_guard lock(mutex_);
    Out& out = peers_[task];
    out.fd = fd;
    out.connecting = connecting;
    out.beats = beats;
    out.seal = std::move(seal);
    if (!hello.empty()) {
      queue_locked(out, Piece{std::string(hello) + '\n', nullptr});
      flush_locked(out);
    }
    settle_locked(task, out);
    connect_added_ = connect_added_ || connecting;
  }
  if (connecting) wake_.notify_all();
}

void LinkWriter::connected(int task) {
  std::lock_guard lock(mutex_);
  if (auto it = peers_.find(task); it != peers_.end()) {
    it->second.connecting = false;
    flush_locked(it->second);
    settle_locked(task, it->second);
  }
}

void LinkWriter::remove(int task) {
  std::lock_guard lock(mutex_);
  if (const auto it = peers_.find(task); it != peers_.end()) {
    written_by_removed_ += it->second.written;
    peers_.erase(it);
    wanting_.erase(task);
  }
}

std::uint64_t LinkWriter::bytes_sent() const {
  std::lock_guard lock(mutex_);
  std::uint64_t total = written_by_removed_;
  for (const auto& [task, out] : peers_) total += out.written;
  return total;
}

bool LinkWriter::send(int task, std::string_view body) {
  std::lock_guard lock(mutex_);
  auto it = peers_.find(task);
  if (it == peers_.end()) return true;  // removed: nothing goes to it any more
  if (it->second.pending_bytes > max_queued_) return false;
  queue_locked(it->second, Piece{it->second.seal->seal(body) + '\n', nullptr});
  flush_locked(it->second);
  settle_locked(task, it->second);
  return true;
}

bool LinkWriter::send(int task, std::shared_ptr<const std::string> body) {
  std::lock_guard lock(mutex_);
  auto it = peers_.find(task);
  if (it == peers_.end()) return true;
  Out& out = it->second;
  if (out.pending_bytes > max_queued_) return false;
  queue_locked(out, Piece{out.seal->seal_head(*body), nullptr});
  queue_locked(out, Piece{{}, std::move(body)});
  queue_locked(out, Piece{"\n", nullptr});
  flush_locked(out);
  settle_locked(task, out);
  return true;
}

void LinkWriter::queue_locked(Out& out, Piece piece) {
  out.pending_bytes += piece.bytes().size();
  out.pending.push_back(std::move(piece));
}

void LinkWriter::flush(int task) {
  std::lock_guard lock(mutex_);
  if (auto it = peers_.find(task); it != peers_.end()) {
    flush_locked(it->second);
    settle_locked(task, it->second);
  }
}

bool LinkWriter::wants_out(int task) const {
  std::lock_guard lock(mutex_);
  const auto it = peers_.find(task);
  return it != peers_.end() && (it->second.connecting || !it->second.pending.empty());
}

std::vector<int> LinkWriter::wanting_out() const {
  std::lock_guard lock(mutex_);
  return {wanting_.begin(), wanting_.end()};
}

void LinkWriter::settle_locked(int task, const Out& out) {
  if (out.connecting || !out.pending.empty())
    wanting_.insert(task);
  else
    wanting_.erase(task);
}

void LinkWriter::stop_heartbeats(int task) {
  std::lock_guard lock(mutex_);
  if (auto it = peers_.find(task); it != peers_.end()) it->second.beats = false;
}

void LinkWriter::start_heartbeats(int task) {
  std::lock_guard lock(mutex_);
  if (auto it = peers_.find(task); it != peers_.end()) it->second.beats = true;
}

void LinkWriter::flush_locked(Out& out) {
  while (!out.pending.empty() && !out.connecting) {
    std::array<iovec, kMaxIov> iov;
    std::size_t count = 0;
    for (auto it = out.pending.begin(); it != out.pending.end() && count < kMaxIov; ++it, ++count) {
      const std::string_view bytes = it->bytes().substr(count == 0 ? out.sent : 0);
      iov[count] = {const_cast<char*>(bytes.data()), bytes.size()};
    }
    msghdr message{};
    message.msg_iov = iov.data();
    message.msg_iovlen = count;
    const ssize_t n = ::sendmsg(out.fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // EAGAIN: later; an error: the reading side reports the loss
    out.pending_bytes -= static_cast<std::size_t>(n);
    out.written += static_cast<std::uint64_t>(n);
    for (auto left = static_cast<std::size_t>(n); left > 0;) {
      const std::size_t rest = out.pending.front().bytes().size() - out.sent;
      if (left < rest) {
        out.sent += left;
        break;
      }
      left -= rest;
      out.sent = 0;
      out.pending.pop_front();
    }
  }
}

void LinkWriter::check_connected_locked(Out& out) {
  // Writable without an error: connected. An error is left for the main loop, which reads
  // it (SO_ERROR) and reports why the connect failed.
  pollfd p{out.fd, POLLOUT, 0};
  if (::poll(&p, 1, 0) == 1 && (p.revents & POLLOUT) && !(p.revents & (POLLERR | POLLHUP))) out.connecting = false;
}

void LinkWriter::run(std::chrono::milliseconds heartbeat) {
  using Clock = std::chrono::steady_clock;
  std::unique_lock lock(mutex_);
  auto next_beat = Clock::now() + heartbeat;
  while (!stopping_) {
    const bool connecting =
        std::any_of(peers_.begin(), peers_.end(), [](const auto& peer) { return peer.second.connecting; });
    const auto until = connecting ? std::min(next_beat, Clock::now() + kConnectLook) : next_beat;
    wake_.wait_until(lock, until, [this] { return stopping_ || connect_added_; });
    if (stopping_) return;
    connect_added_ = false;
    const bool beat = Clock::now() >= next_beat;
    if (beat) next_beat = Clock::now() + heartbeat;
    for (auto& [task, out] : peers_) {
      if (out.connecting) check_connected_locked(out);
      if (!out.connecting) {
        if (beat && out.beats && out.pending_bytes <= kMaxPending)
          queue_locked(out, Piece{out.seal->seal(format_link(LinkAlive{})) + '\n', nullptr});
        flush_locked(out);  // a hello that waited for the connect, beating peer or not
      }
      settle_locked(task, out);
    }
  }
}

}  // namespace hyrun
