#include "hyrun/link/node_link.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <memory>

#include "hyrun/common/error.hpp"
#include "hyrun/common/hex.hpp"
#include "hyrun/common/hmac_sha256.hpp"

namespace hyrun {
namespace {

// Every message is a short line (a sealed "lost" about 300 bytes at most); more is not a hyrun.
constexpr std::size_t kMaxLine = 512;  // before the hello is read: a hello's size
// An identified peer's sealed line: at most a piece of bytes (link_message.hpp).
constexpr std::size_t kMaxSealedLine = kLinkMaxLine;

void set_nodelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // a heartbeat must not wait for Nagle
}

// "15 s", "0.5 s": a limit as the messages say it.
std::string seconds_text(std::chrono::milliseconds d) { return fmt::format("{:g} s", d.count() / 1000.0); }

// The bye of a hyrun that ends may wait this long for its connect or its last bytes.
constexpr auto kByeLimit = std::chrono::seconds(2);

}  // namespace

std::chrono::milliseconds NodeLink::heartbeat_for(std::chrono::milliseconds silence_limit) {
  return std::clamp(silence_limit / 5, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
}

NodeLink::NodeLink(std::chrono::milliseconds silence_limit, std::size_t max_queued)
    : silence_limit_(silence_limit), writer_(std::make_unique<LinkWriter>(heartbeat_for(silence_limit), max_queued)) {}

NodeLink NodeLink::listen(std::chrono::milliseconds silence_limit, std::size_t max_queued) {
  NodeLink link(silence_limit, max_queued);
  link.root_ = true;
  link.listener_ = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!link.listener_) throw SystemError("socket (the node link)", errno);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);  // the other nodes reach it at one of the addresses in the record
  if (::bind(link.listener_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    throw SystemError("bind (the node link)", errno);
  // The kernel's longest backlog: every node of the job connects at once after the fence, and
  // a connection past a full backlog waits for the client's SYN retransmission (1 s, then 3 s).
  if (::listen(link.listener_.get(), SOMAXCONN) != 0) throw SystemError("listen (the node link)", errno);
  socklen_t length = sizeof a;
  if (::getsockname(link.listener_.get(), reinterpret_cast<sockaddr*>(&a), &length) != 0)
    throw SystemError("getsockname (the node link)", errno);
  link.port_ = ntohs(a.sin_port);
  return link;
}

void NodeLink::expect(const std::vector<std::string>& hosts, int self, std::string token) {
  self_ = self;
  token_ = std::move(token);
  peers_.clear();
  peers_.resize(hosts.size());
  const auto now = Clock::now();
  for (std::size_t task = 0; task < hosts.size(); ++task) {
    peers_[task].task = static_cast<int>(task);
    peers_[task].host = hosts[task];
    peers_[task].heard = now;
    peers_[task].gone = static_cast<int>(task) == self;
  }
  // A node that is busy after the fence connects late; it is not lost before its silence would be.
  connect_deadline_ = now + std::max<Clock::duration>(kConnectLimit, silence_limit_);
  max_unidentified_ = kMaxUnidentified + (hosts.empty() ? 0 : hosts.size() - 1);
}

NodeLink NodeLink::connect(const std::string& address, int port, int self, std::string root_host, std::string token,
                           std::chrono::milliseconds silence_limit, std::size_t max_queued) {
  NodeLink link(silence_limit, max_queued);
  link.self_ = self;
  link.token_ = std::move(token);
  Peer root;
  root.task = 0;
  root.host = std::move(root_host);
  root.fd = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!root.fd) throw SystemError("socket (the node link)", errno);
  set_nodelay(root.fd.get());
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (inet_pton(AF_INET, address.c_str(), &a.sin_addr) != 1)
    throw Error(fmt::format("the root's node link address '{}' is not an IPv4 address", address));
  const auto now = Clock::now();
  root.heard = now;
  if (::connect(root.fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (errno != EINPROGRESS)
      throw SystemError(fmt::format("connect to the root's hyrun at {}:{} (the node link)", address, port), errno);
    root.connecting = true;
  }
  // A fresh nonce per connection: the session's key derives from it (link_seal.hpp).
  const std::string nonce = new_link_nonce();
  link.writer_->add(root.task, root.fd.get(), root.connecting,
                    LinkSeal(link.token_, self, nonce, LinkSeal::Direction::kToRoot));
  link.writer_->send_hello(root.task, format_link(LinkHello{self, nonce, link_hello_proof(link.token_, self, nonce)}));
  root.seal.emplace(link.token_, self, nonce, LinkSeal::Direction::kFromRoot);
  link.peers_.push_back(std::move(root));
  return link;
}

void NodeLink::add_poll_fds(std::vector<pollfd>& fds) {
  if (listener_ && Clock::now() >= accept_paused_until_) fds.push_back({listener_.get(), POLLIN, 0});
  for (const auto& p : peers_)
    if (p.fd && !p.gone)
      fds.push_back(
          {p.fd.get(), static_cast<short>(POLLIN | (p.connecting || writer_->wants_out(p.task) ? POLLOUT : 0)), 0});
  for (const auto& p : unidentified_)
    if (p.fd && !p.gone) fds.push_back({p.fd.get(), POLLIN, 0});
}

bool NodeLink::on_poll(const pollfd& p) {
  if (listener_ && p.fd == listener_.get()) {
    accept_all();
    return true;
  }
  for (auto* list : {&peers_, &unidentified_})
    for (auto& peer : *list) {
      if (!peer.fd || peer.fd.get() != p.fd || peer.gone) continue;
      if (peer.connecting && (p.revents & (POLLOUT | POLLERR | POLLHUP))) {
        int error = 0;
        socklen_t length = sizeof error;
        ::getsockopt(peer.fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
        if (error != 0) {
          lose(peer, fmt::format("cannot connect: {}", std::strerror(error)));
          return true;
        }
        peer.connecting = false;
        peer.heard = Clock::now();
        writer_->connected(peer.task);
      }
      if (p.revents & POLLOUT) writer_->flush(peer.task);
      if (!peer.gone && (p.revents & (POLLIN | POLLHUP | POLLERR))) on_readable(peer);
      if (list == &unidentified_)  // identified peers moved out; closed ones are dropped
        std::erase_if(unidentified_, [](const Peer& q) { return !q.fd || q.gone; });
      return true;
    }
  return false;
}

void NodeLink::accept_all() {
  for (;;) {
    UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd) {
      const int error = errno;
      if (error == EINTR || error == ECONNABORTED) continue;
      if (error == EAGAIN || error == EWOULDBLOCK) return;
      // Out of descriptors (EMFILE, ENFILE) or memory: the connection stays in the backlog and
      // the listener readable, so polling it again at once would spin. A node's connect waits.
      accept_paused_until_ = Clock::now() + kAcceptPause;
      accept_failures_.warn(fmt::format("node link: cannot accept a connection ({}); not accepting for {} ms",
                                        std::strerror(error), kAcceptPause.count()));
      return;
    }
    set_nodelay(fd.get());
    if (unidentified_.size() >= max_unidentified_) make_room();
    Peer peer;
    peer.fd = std::move(fd);
    peer.heard = Clock::now();
    unidentified_.push_back(std::move(peer));
  }
}

void NodeLink::make_room() {
  // A hyrun sends its hello at once: read what the waiting ones sent before closing any.
  for (auto& p : unidentified_)
    if (p.fd && !p.gone) on_readable(p);
  std::erase_if(unidentified_, [](const Peer& q) { return !q.fd || q.gone; });
  if (unidentified_.size() < max_unidentified_) return;
  // The oldest, not the newest: connections held open by someone else must not keep a
  // node that connects later out (its hello is read before the next one is closed).
  unidentified_.erase(unidentified_.begin());
  refusals_.warn(
      fmt::format("node link: {} connections were waiting for their hello, the most allowed: the oldest "
                  "was closed",
                  max_unidentified_));
}

void NodeLink::on_readable(Peer& peer) {
  std::array<char, 65536> buffer;
  for (;;) {
    // An unidentified peer gets no more than a hello's worth read at a time.
    const std::size_t room = peer.task < 0 ? kMaxLine + 1 : buffer.size();
    const ssize_t n = ::recv(peer.fd.get(), buffer.data(), room, 0);
    if (n > 0) {
      received_ += static_cast<std::uint64_t>(n);
      if (peer.task >= 0) peer.heard = Clock::now();  // an unidentified peer's deadline runs from accept
      const std::size_t searched = peer.in.size();    // a long line is searched for its end once
      peer.in.append(buffer.data(), static_cast<std::size_t>(n));
      // The lines of this read are taken in place and cut off once: erasing each from the front
      // would move the rest of the buffer once a line.
      std::size_t start = 0;
      for (auto nl = peer.in.find('\n', searched); nl != std::string::npos && !peer.gone;
           nl = peer.in.find('\n', start)) {
        const std::string line = peer.in.substr(start, nl - start);
        start = nl + 1;
        if (peer.task < 0) {  // a hello: on_line hands what follows it to the task's own slot
          peer.in.erase(0, start);
          start = 0;
        }
        on_line(peer, line);
      }
      if (peer.gone) return;
      peer.in.erase(0, start);
      if (peer.in.size() > (peer.task < 0 ? kMaxLine : kMaxSealedLine)) {
        if (peer.task < 0) return close_quietly(peer);
        return lose(peer, "it sent something that is not the node link's protocol");
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // EOF or an error: after its bye, the peer just left.
    if (peer.said_bye || peer.task < 0) return close_quietly(peer);
    // A peer that died with our heartbeats unread resets the connection instead of closing
    // it: the same end, said the same way.
    const bool closed = n == 0 || errno == ECONNRESET;
    return lose(peer, closed ? "connection closed" : fmt::format("connection lost: {}", std::strerror(errno)));
  }
}

void NodeLink::on_line(Peer& peer, const std::string& line) {
  if (peer.task < 0) {  // root: the first line of an accepted connection is the hello
    const auto hello = parse_link<LinkHello>(line);
    const int task = hello ? hello->task : -1;
    if (!hello || task >= static_cast<int>(peers_.size()) || task == self_ ||
        !equal_in_constant_time(hello->proof, link_hello_proof(token_, task, hello->nonce))) {
      refusals_.warn("node link: a connection that is not a hyrun of this job was refused");
      return close_quietly(peer);
    }
    Peer& slot = peers_[static_cast<std::size_t>(task)];
    if (slot.fd || slot.gone) {
      refusals_.warn(fmt::format("node link: a second connection for task {} was refused", task));
      return close_quietly(peer);
    }
    slot.fd = std::move(peer.fd);
    slot.heard = Clock::now();
    slot.seal.emplace(token_, task, hello->nonce, LinkSeal::Direction::kToRoot);
    writer_->add(task, slot.fd.get(), false, LinkSeal(token_, task, hello->nonce, LinkSeal::Direction::kFromRoot));
    slot.in = std::move(peer.in);
    peer.gone = true;
    spdlog::debug("node link: the hyrun of task {} on {} connected", task, slot.host);
    // What came with the hello (a short job's bye) counts now: its EOF may be next.
    for (auto nl = slot.in.find('\n'); nl != std::string::npos && !slot.gone; nl = slot.in.find('\n')) {
      const std::string next = slot.in.substr(0, nl);
      slot.in.erase(0, nl + 1);
      on_line(slot, next);
    }
    return;
  }
  // After the hello, only sealed lines: one made up, changed or replayed by someone who can
  // write into the connection is the end of the link, as a cut would be.
  const auto opened = peer.seal->open(line);
  if (!opened)
    return lose(peer, "it sent a line that fails the node link's authentication (made up, changed or replayed)");
  const std::string& body = *opened;
  const auto kind = link_kind_of(body);
  if (!kind)
    return lose(peer,
                fmt::format("it sent a line of a kind that the node link's protocol ({}) does not have ('{:.40}')",
                            kLinkHello, body));
  if (take_own(peer, *kind, body)) return;
  if (const auto handler = handlers_.find(*kind); handler != handlers_.end() && handler->second(peer.task, body))
    return;
  lose(peer, fmt::format("it sent '{:.40}', which is not a {} line this hyrun takes", body, link_kind_word(*kind)));
}

bool NodeLink::take_own(Peer& peer, LinkKind kind, const std::string& body) {
  switch (kind) {
    case LinkKind::kAlive: return parse_link<LinkAlive>(body).has_value();
    case LinkKind::kBye:
      if (!parse_link<LinkBye>(body)) return false;
      peer.said_bye = true;
      writer_->stop_heartbeats(peer.task);  // one that left reads no more
      return true;
    case LinkKind::kLost: {
      // From the root: a node it lost and the job goes on without.
      const auto lost = parse_link<LinkLoss>(body);
      if (root_ || !lost || lost->task <= 0 || lost->task == self_) return false;
      report(Loss{lost->task, lost->host, lost->why, true});
      return true;
    }
    default: return false;
  }
}

void NodeLink::on(LinkKind kind, Handler handler) {
  if (kind == LinkKind::kAlive || kind == LinkKind::kBye || kind == LinkKind::kLost)
    throw Error(fmt::format("the node link takes its {} lines itself", link_kind_word(kind)));
  handlers_[kind] = std::move(handler);
}

void NodeLink::broadcast(std::string body) {
  const auto shared = std::make_shared<const std::string>(std::move(body));  // one copy for every peer's queue
  for (auto& peer : peers_)
    if (peer.fd && !peer.gone && !peer.said_bye && !writer_->send(peer.task, shared)) peer.overflowed = true;
}

// A message the writer cannot queue is not dropped in silence: the peer is lost at the next
// tick (not here, inside whatever is sending), and the job learns why.
void NodeLink::send(Peer& peer, const std::string& line) {
  if (!writer_->send(peer.task, line)) peer.overflowed = true;
}

void NodeLink::send_to(int task, const std::string& body) {
  for (auto& peer : peers_)
    if (peer.task == task && !peer.gone) return send(peer, body);
}

NodeLink::Clock::time_point NodeLink::wake_by() const {
  auto t = Clock::now() + silence_limit_;
  for (const auto& p : peers_) {
    if (!p.gone && p.overflowed) return Clock::now();
    if (!p.gone && !p.said_bye) t = std::min(t, (p.fd ? p.heard + silence_limit_ : connect_deadline_));
  }
  for (const auto& p : unidentified_)
    if (!p.gone) t = std::min(t, p.heard + hello_limit());
  if (listener_ && accept_paused_until_ > Clock::now()) t = std::min(t, accept_paused_until_);
  return t;
}

void NodeLink::on_tick() {
  const auto now = Clock::now();
  for (auto& p : peers_) {
    if (!p.gone && p.overflowed) {
      lose(p, fmt::format("it took none of the {} MiB queued for it on the node link: its hyrun reads nothing",
                          writer_->max_queued() >> 20));
      continue;
    }
    if (p.gone || p.said_bye) continue;
    if (!p.fd && now >= connect_deadline_)
      lose(p, fmt::format("it did not connect within {} of the fence",
                          seconds_text(std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::max<Clock::duration>(kConnectLimit, silence_limit_)))));
    else if (p.fd && now - p.heard >= silence_limit_)
      lose(p, p.connecting ? fmt::format("cannot connect: no answer within {}", seconds_text(silence_limit_))
                           : fmt::format("silent for {} (--node-timeout): its node is off the network or its hyrun "
                                         "is stopped",
                                         seconds_text(silence_limit_)));
  }
  for (auto& p : unidentified_)
    if (now - p.heard >= hello_limit()) close_quietly(p);
  std::erase_if(unidentified_, [](const Peer& q) { return !q.fd || q.gone; });
  refusals_.flush(now);
  accept_failures_.flush(now);
}

void NodeLink::lose(Peer& peer, const std::string& why) {
  peer.gone = true;
  writer_->remove(peer.task);
  peer.fd.reset();
  const Loss loss{peer.task, peer.host, why, false};
  if (!report(loss) || !root_) return;
  // The job goes on without the node: the others' ranks must learn of its ranks' deaths too.
  broadcast(format_link(LinkLoss{loss.task, loss.host, why.substr(0, 100)}));
}

bool NodeLink::report(const Loss& loss) {
  if (lost_) return false;  // the job is already ending
  if (on_loss_ && on_loss_(loss)) return true;
  lost_ = true;
  return false;
}

void NodeLink::close_quietly(Peer& peer) {
  peer.gone = true;
  if (peer.task >= 0) writer_->remove(peer.task);
  peer.fd.reset();
}

void NodeLink::say_bye() {
  for (auto& p : peers_)
    if (p.fd && !p.gone) {
      send(p, format_link(LinkBye{}));
      writer_->stop_heartbeats(p.task);
    }
  // A short job may end before its connect completed or its hello left: finish them,
  // bounded, or the root would take this node's end for a loss.
  const auto end = Clock::now() + std::min<Clock::duration>(kByeLimit, silence_limit_);
  for (;;) {
    std::vector<pollfd> fds;
    for (const auto& p : peers_)
      if (p.fd && !p.gone && (p.connecting || writer_->wants_out(p.task))) fds.push_back({p.fd.get(), POLLOUT, 0});
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    if (fds.empty() || ms <= 0) return;
    if (::poll(fds.data(), fds.size(), static_cast<int>(ms)) < 0 && errno != EINTR) return;
    for (const auto& f : fds)
      for (auto& p : peers_)
        if (p.fd && p.fd.get() == f.fd && f.revents) finish_bye(p, f.revents);
  }
}

void NodeLink::finish_bye(Peer& p, short revents) {
  if (p.connecting) {
    int error = 0;
    socklen_t length = sizeof error;
    ::getsockopt(p.fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0) return close_quietly(p);  // leaving anyway: nothing to report
    p.connecting = false;
    writer_->connected(p.task);
  }
  if (revents & (POLLERR | POLLHUP)) return close_quietly(p);
  writer_->flush(p.task);
  if (writer_->wants_out(p.task) && !(revents & POLLOUT)) close_quietly(p);
}

void NodeLink::service() {
  std::vector<pollfd> fds;
  add_poll_fds(fds);
  if (::poll(fds.data(), fds.size(), 0) > 0)
    for (const auto& p : fds)
      if (p.revents) on_poll(p);
  on_tick();
}

bool NodeLink::await_byes(SignalEvents& signals) {
  const auto waiting = [this] {
    return std::any_of(peers_.begin(), peers_.end(), [](const Peer& p) { return !p.gone && !p.said_bye; });
  };
  while (waiting() && !lost_ && !signals.pending_stop()) {
    std::vector<pollfd> fds{{signals.fd(), POLLIN, 0}};
    add_poll_fds(fds);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake_by() - Clock::now()).count();
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<long long>(ms, 0, 1000)));
    if (n < 0 && errno != EINTR) throw SystemError("poll (awaiting the other nodes' hyrun)", errno);
    for (const auto& p : fds)
      if (p.revents && p.fd != signals.fd()) on_poll(p);
    if (n > 0 && fds[0].revents) {
      // Only stop signals matter here (SIGCHLD of our reaped ranks, SIGUSR*: nothing to forward).
      if (!signals.pending_stop()) signals.drain();
    }
    on_tick();
  }
  return !lost_;
}

}  // namespace hyrun
