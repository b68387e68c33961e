#include "hyrun/link/node_link.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <memory>
#include <utility>

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

// The epoll set's keys: an identified peer's task (>= 0), or one of these.
constexpr std::uint64_t kListenerKey = std::uint64_t{1} << 63;
constexpr std::uint64_t kUnidentifiedKey = std::uint64_t{1} << 62;  // | the descriptor
// Events taken from the epoll set in one look; more wait for the next (level-triggered).
constexpr int kMaxEvents = 64;

// Marks a peer whose lines on_readable() is taking, for as long as it does.
class ReadingMark {
 public:
  explicit ReadingMark(bool& flag) : flag_(flag) { flag_ = true; }
  ~ReadingMark() { flag_ = false; }
  ReadingMark(const ReadingMark&) = delete;
  ReadingMark& operator=(const ReadingMark&) = delete;

 private:
  bool& flag_;
};

}  // namespace

std::chrono::milliseconds NodeLink::heartbeat_for(std::chrono::milliseconds silence_limit) {
  return std::clamp(silence_limit / 5, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
}

NodeLink::NodeLink(std::chrono::milliseconds silence_limit, std::size_t max_queued)
    : poller_(::epoll_create1(EPOLL_CLOEXEC)),
      silence_limit_(silence_limit),
      writer_(std::make_unique<LinkWriter>(heartbeat_for(silence_limit), max_queued)) {
  if (!poller_) throw SystemError("epoll_create1 (the node link)", errno);
}

void NodeLink::watch(int fd, std::uint64_t key, std::uint32_t events) {
  epoll_event e{};
  e.events = events;
  e.data.u64 = key;
  if (::epoll_ctl(poller_.get(), EPOLL_CTL_ADD, fd, &e) != 0) throw SystemError("epoll_ctl (the node link)", errno);
}

void NodeLink::rewatch(int fd, std::uint64_t key, std::uint32_t events) {
  epoll_event e{};
  e.events = events;
  e.data.u64 = key;
  if (::epoll_ctl(poller_.get(), EPOLL_CTL_MOD, fd, &e) != 0) throw SystemError("epoll_ctl (the node link)", errno);
}

// Before the socket closes: a copy of it in a child not yet exec'd would keep it in the set.
void NodeLink::unwatch(const Peer& peer) {
  if (peer.fd) ::epoll_ctl(poller_.get(), EPOLL_CTL_DEL, peer.fd.get(), nullptr);
}

NodeLink NodeLink::listen(std::chrono::milliseconds silence_limit, std::size_t max_queued) {
  NodeLink link(silence_limit, max_queued);
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

void NodeLink::expect(const std::vector<std::string>& hosts, int self, std::string token,
                      std::optional<LinkTree> tree) {
  self_ = self;
  root_ = self == 0;
  token_ = std::move(token);
  tree_ = tree ? std::move(*tree) : LinkTree(LinkTree::kMaxWidth, std::max<int>(1, static_cast<int>(hosts.size())));
  hosts_ = hosts;
  const auto now = Clock::now();
  std::vector<int> expected;
  if (root_) {
    peers_.clear();
    peers_.resize(hosts.size());
    for (std::size_t task = 0; task < hosts.size(); ++task) expected.push_back(static_cast<int>(task));
  } else {
    expected = tree_.children(self);
  }
  for (const int task : expected) {
    if (!root_) peers_.emplace_back();
    Peer& p = root_ ? peers_[static_cast<std::size_t>(task)] : peers_.back();
    p.slot = root_ ? task : static_cast<int>(peers_.size() - 1);
    p.task = task;
    p.host = static_cast<std::size_t>(task) < hosts.size() ? hosts[static_cast<std::size_t>(task)] : "";
    p.heard = now;
    p.gone = task == self;
    // The root links with every node that needs it, but waits only for its children.
    p.watched = tree_.parent(task) == self;
    p.connect_by = now + connect_limit();  // a node busy after the fence connects late
  }
  judge_by(now);
  // Any node of the job may connect to ask for its ranks' data (ask()), besides the children.
  max_unidentified_ = kMaxUnidentified + std::max<std::size_t>(hosts.size(), 1) - 1;
}

NodeLink NodeLink::unlistened(int self, std::string token, LinkTree tree, std::chrono::milliseconds silence_limit,
                              std::size_t max_queued) {
  NodeLink link(silence_limit, max_queued);
  link.self_ = self;
  link.token_ = std::move(token);
  link.tree_ = std::move(tree);
  return link;
}

NodeLink NodeLink::connect(const std::string& address, int port, int self, std::string root_host, std::string token,
                           std::chrono::milliseconds silence_limit, std::size_t max_queued) {
  NodeLink link =
      unlistened(self, std::move(token), LinkTree(LinkTree::kMaxWidth, self + 1), silence_limit, max_queued);
  link.dial(0, root_host, address, port);
  return link;
}

void NodeLink::dial(int task, const std::string& host, const std::string& address, int port) {
  peers_[open_connection(task, host, address, port, LinkPurpose::kTree)].watched = task == tree_.parent(self_);
}

void NodeLink::reach_root(std::string host, std::string address, int port) {
  root_at_ = RootAt{std::move(host), std::move(address), port};
}

NodeLink::Peer* NodeLink::root_link() {
  if (root_) return nullptr;
  if (Peer* root = find_peer(0)) return root;
  if (!root_at_) return nullptr;
  try {
    spdlog::debug("node link: connecting to the root's hyrun at {}:{}", root_at_->address, root_at_->port);
    return &peers_[open_connection(0, root_at_->host, root_at_->address, root_at_->port, LinkPurpose::kTree)];
  } catch (const Error& e) {
    // What this node had to tell the root cannot reach it (a fence's part, a loss): the root
    // is lost to it, said at the next tick (not inside whatever is sending), as when the
    // connect fails later.
    root_unreachable_ = Loss{0, root_at_->host, fmt::format("cannot connect: {}", e.what())};
    root_at_.reset();
    judge_by(Clock::now());
    return nullptr;
  }
}

std::size_t NodeLink::open_connection(int task, const std::string& host, const std::string& address, int port,
                                      LinkPurpose purpose) {
  Peer peer;
  peer.task = task;
  peer.host = host;
  peer.watched = false;
  peer.slot = static_cast<int>(peers_.size());
  peer.fd = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!peer.fd) throw SystemError("socket (the node link)", errno);
  set_nodelay(peer.fd.get());
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  const std::string whose = task == 0 ? std::string("the root's") : fmt::format("task {}'s", task);
  if (inet_pton(AF_INET, address.c_str(), &a.sin_addr) != 1)
    throw Error(fmt::format("{} node link address '{}' is not an IPv4 address", whose, address));
  peer.heard = Clock::now();
  peer.launching = purpose == LinkPurpose::kTree;
  if (::connect(peer.fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (errno != EINPROGRESS)
      throw SystemError(fmt::format("connect to {} hyrun at {}:{} (the node link)", whose, address, port), errno);
    peer.connecting = true;
  }
  peer.out_armed = true;  // the connect's end, then the hello
  watch(peer.fd.get(), static_cast<std::uint64_t>(peer.slot), EPOLLIN | EPOLLOUT);
  out_armed_.insert(peer.slot);
  judge_by(peer.heard);
  // A fresh nonce per connection: the session's key derives from it (link_seal.hpp).
  const std::string nonce = new_link_nonce();
  // Heartbeats to the parent, and to the root on a connection to it: the root may watch this
  // node from any moment (its parent lost, or gone early: take_hello, adopt_children_of),
  // and learns it only here. A direct modex connection carries none.
  writer_->add(peer.slot, peer.fd.get(), peer.connecting, LinkSeal(token_, self_, nonce, LinkSeal::Direction::kToRoot),
               purpose == LinkPurpose::kTree && (task == tree_.parent(self_) || task == 0),
               format_link(LinkHello{self_, nonce, link_hello_proof(token_, self_, task, nonce, purpose)}));
  peer.seal.emplace(token_, self_, nonce, LinkSeal::Direction::kFromRoot);
  peers_.push_back(std::move(peer));
  return peers_.size() - 1;
}

NodeLink::Peer* NodeLink::find_peer(int task) {
  if (task >= 0 && static_cast<std::size_t>(task) < peers_.size() &&
      peers_[static_cast<std::size_t>(task)].task == task &&
      peers_[static_cast<std::size_t>(task)].direct == Peer::Direct::kNo)
    return &peers_[static_cast<std::size_t>(task)];
  for (auto& p : peers_)
    if (p.task == task && p.direct == Peer::Direct::kNo) return &p;
  return nullptr;
}

NodeLink::Peer* NodeLink::find_direct(int task, Peer::Direct which) {
  const auto it = direct_.find({task, which});
  if (it == direct_.end()) return nullptr;
  Peer& p = peers_[it->second];
  return p.fd && !p.gone ? &p : nullptr;
}

bool NodeLink::ask(int task, const std::string& body) {
  if (task <= 0 || task == self_ || task >= tree_.tasks() || lost_ || absorbed_.contains(task)) return false;
  Peer* peer = find_direct(task, Peer::Direct::kOut);
  if (!peer) {
    const auto endpoint = locate_ ? locate_(task) : std::nullopt;
    if (!endpoint) return false;
    try {
      const std::size_t slot = open_connection(task, "", endpoint->address, endpoint->port, LinkPurpose::kDirectModex);
      peers_[slot].direct = Peer::Direct::kOut;
      direct_[{task, Peer::Direct::kOut}] = slot;
      peer = &peers_[slot];
    } catch (const Error& e) {
      spdlog::debug("node link: no connection of its own to task {}: {}", task, e.what());
      return false;
    }
  }
  send(*peer, body);
  return true;
}

bool NodeLink::reply(int task, const std::string& body) {
  Peer* peer = find_direct(task, Peer::Direct::kIn);
  if (!peer) return false;
  send(*peer, body);
  return true;
}

void NodeLink::add_poll_fds(std::vector<pollfd>& fds) {
  if (listener_) {
    const bool accepting = Clock::now() >= accept_paused_until_;
    if (accepting && !listener_watched_) watch(listener_.get(), kListenerKey, EPOLLIN);
    if (!accepting && listener_watched_) ::epoll_ctl(poller_.get(), EPOLL_CTL_DEL, listener_.get(), nullptr);
    listener_watched_ = accepting;
  }
  settle_writability();
  fds.push_back({poller_.get(), POLLIN, 0});
}

// Only the sockets armed now or wanting it are looked at: at the root, a few of every node's.
void NodeLink::settle_writability() {
  const std::vector<int> wanting = writer_->wanting_out();
  std::vector<int> slots;
  std::set_union(wanting.begin(), wanting.end(), out_armed_.begin(), out_armed_.end(), std::back_inserter(slots));
  for (const int slot : slots) {
    Peer& p = peers_[static_cast<std::size_t>(slot)];
    if (!p.fd || p.gone) {
      out_armed_.erase(slot);
      continue;
    }
    const bool out = p.connecting || std::binary_search(wanting.begin(), wanting.end(), slot);
    if (out == p.out_armed) continue;
    rewatch(p.fd.get(), static_cast<std::uint64_t>(slot), out ? EPOLLIN | EPOLLOUT : EPOLLIN);
    p.out_armed = out;
    if (out)
      out_armed_.insert(slot);
    else
      out_armed_.erase(slot);
  }
}

bool NodeLink::on_poll(const pollfd& p) {
  if (p.fd != poller_.get()) return false;
  std::array<epoll_event, kMaxEvents> events;
  const int n = ::epoll_wait(poller_.get(), events.data(), kMaxEvents, 0);
  for (int i = 0; i < n; ++i) {
    const std::uint64_t key = events[static_cast<std::size_t>(i)].data.u64;
    // EPOLLIN, EPOLLOUT, EPOLLERR and EPOLLHUP are poll's bits.
    const auto revents = static_cast<short>(events[static_cast<std::size_t>(i)].events);
    if (key == kListenerKey) {
      if (listener_watched_) accept_all();
    } else if (key & kUnidentifiedKey) {
      const int fd = static_cast<int>(key & ~kUnidentifiedKey);
      const auto it = std::find_if(unidentified_.begin(), unidentified_.end(),
                                   [fd](const Peer& q) { return q.fd && q.fd.get() == fd && !q.gone; });
      if (it != unidentified_.end()) on_ready(*it, revents);
      // Identified peers moved out; closed ones are dropped.
      std::erase_if(unidentified_, [](const Peer& q) { return !q.fd || q.gone; });
    } else if (key < peers_.size() && peers_[key].fd && !peers_[key].gone) {
      on_ready(peers_[key], revents);
    }
  }
  return true;
}

void NodeLink::on_ready(Peer& peer, short revents) {
  if (peer.connecting && (revents & (POLLOUT | POLLERR | POLLHUP))) {
    int error = 0;
    socklen_t length = sizeof error;
    ::getsockopt(peer.fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0) return lose(peer, fmt::format("cannot connect: {}", std::strerror(error)));
    peer.connecting = false;
    peer.heard = Clock::now();
    writer_->connected(peer.slot);
  }
  if (revents & POLLOUT) writer_->flush(peer.slot);
  if (!peer.gone && (revents & (POLLIN | POLLHUP | POLLERR))) on_readable(peer);
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
      judge_by(accept_paused_until_);  // the loop must wake to accept again
      accept_failures_.warn(fmt::format("node link: cannot accept a connection ({}); not accepting for {} ms",
                                        std::strerror(error), kAcceptPause.count()));
      return;
    }
    set_nodelay(fd.get());
    if (unidentified_.size() >= max_unidentified_) make_room();
    Peer peer;
    watch(fd.get(), kUnidentifiedKey | static_cast<std::uint64_t>(fd.get()), EPOLLIN);
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
  close_quietly(unidentified_.front());
  unidentified_.erase(unidentified_.begin());
  refusals_.warn(
      fmt::format("node link: {} connections were waiting for their hello, the most allowed: the oldest "
                  "was closed",
                  max_unidentified_));
}

void NodeLink::on_readable(Peer& peer) {
  const ReadingMark mark(peer.reading);
  std::array<char, 65536> buffer;
  for (;;) {
    // An unidentified peer gets no more than a hello's worth read at a time.
    const std::size_t room = peer.task < 0 ? kMaxLine + 1 : buffer.size();
    const ssize_t n = ::recv(peer.fd.get(), buffer.data(), room, 0);
    if (n > 0) {
      received_ += static_cast<std::uint64_t>(n);
      if (peer.task >= 0) {  // an unidentified peer's deadline runs from accept
        peer.heard = Clock::now();
        peer.launching = false;
      }
      const std::size_t searched = peer.in.size();  // a long line is searched for its end once
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
        if (peer.task < 0) {
          spdlog::debug("node link: closed a connection whose first line is longer than a hello");
          return close_quietly(peer);
        }
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

void NodeLink::take_hello(Peer& peer, const std::string& line) {
  const auto hello = parse_link<LinkHello>(line);
  const int task = hello ? hello->task : -1;
  const bool of_job = hello && task >= 0 && task < tree_.tasks() && task != self_;
  // A tree connection (the root's every node, a parent's children), or a node's direct modex
  // connection (to any node but the root): the proof says which, so neither opens the other.
  const bool tree_peer =
      of_job && equal_in_constant_time(hello->proof, link_hello_proof(token_, task, self_, hello->nonce));
  const bool direct = of_job && !root_ && !tree_peer &&
                      equal_in_constant_time(
                          hello->proof, link_hello_proof(token_, task, self_, hello->nonce, LinkPurpose::kDirectModex));
  Peer* place = tree_peer ? find_peer(task) : nullptr;
  if (tree_peer && !root_ && (!place || tree_.parent(task) != self_)) place = nullptr;  // not a child of this node
  if (!place && !direct) {
    refusals_.warn("node link: a connection that is not a hyrun of this job was refused");
    return close_quietly(peer);
  }
  if (direct) place = add_direct_in(task);
  if (!place || place->fd || place->gone) {
    refusals_.warn(fmt::format("node link: a second connection for task {} was refused", task));
    return close_quietly(peer);
  }
  Peer& slot = *place;
  if (root_ && !direct && !slot.watched) {  // a node whose parent left or was lost: the root watches it
    const Peer& parent = peers_[static_cast<std::size_t>(tree_.parent(task))];
    slot.watched = tree_.parent(task) > 0 && (parent.gone || parent.said_bye);
  }
  slot.fd = std::move(peer.fd);
  rewatch(slot.fd.get(), static_cast<std::uint64_t>(slot.slot), EPOLLIN);
  slot.heard = Clock::now();
  slot.seal.emplace(token_, task, hello->nonce, LinkSeal::Direction::kToRoot);
  writer_->add(slot.slot, slot.fd.get(), false, LinkSeal(token_, task, hello->nonce, LinkSeal::Direction::kFromRoot),
               slot.watched);
  slot.in = std::move(peer.in);
  peer.gone = true;
  spdlog::debug("node link: the hyrun of task {} on {} connected{}", task, slot.host,
                direct ? " (its direct modex)" : "");
  // The nodes the job went on without before this one linked: its ranks must hear of them.
  if (!direct)
    for (const auto& word : told_) send(slot, word);
  // What came with the hello (a short job's bye) counts now: its EOF may be next.
  for (auto nl = slot.in.find('\n'); nl != std::string::npos && !slot.gone; nl = slot.in.find('\n')) {
    const std::string next = slot.in.substr(0, nl);
    slot.in.erase(0, nl + 1);
    on_line(slot, next);
  }
}

NodeLink::Peer* NodeLink::add_direct_in(int task) {
  if (find_direct(task, Peer::Direct::kIn)) return nullptr;  // one a node
  Peer& p = peers_.emplace_back();
  p.task = task;
  p.slot = static_cast<int>(peers_.size() - 1);
  p.watched = false;
  p.direct = Peer::Direct::kIn;
  if (static_cast<std::size_t>(task) < hosts_.size()) p.host = hosts_[static_cast<std::size_t>(task)];
  direct_[{task, Peer::Direct::kIn}] = peers_.size() - 1;
  return &p;
}

void NodeLink::on_line(Peer& peer, const std::string& line) {
  if (peer.task < 0) return take_hello(peer, line);  // the first line of an accepted connection
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
  if (peer.direct != Peer::Direct::kNo) return on_direct_line(peer, *kind, body);
  if (take_own(peer, *kind, body)) return;
  // Between two nodes of the tree (neither the root) only the link's own lines travel.
  const bool to_or_from_root = root_ || peer.task == 0;
  if (const auto handler = handlers_.find(*kind);
      to_or_from_root && handler != handlers_.end() && handler->second(peer.task, body))
    return;
  lose(peer, fmt::format("it sent '{:.40}', of a kind ({}) that this hyrun does not take from it", body,
                         link_kind_word(*kind)));
}

// ask()'s connection carries requests one way and their answers the other, nothing else.
void NodeLink::on_direct_line(Peer& peer, LinkKind kind, const std::string& body) {
  const bool fits = peer.direct == Peer::Direct::kIn
                        ? kind == LinkKind::kDmodexGet
                        : kind == LinkKind::kDmodexData || kind == LinkKind::kDmodexNone || kind == LinkKind::kMore;
  if (const auto handler = handlers_.find(kind); fits && handler != handlers_.end() && handler->second(peer.task, body))
    return;
  lose(peer, fmt::format("it sent '{:.40}' on a direct modex connection", body));
}

bool NodeLink::take_own(Peer& peer, LinkKind kind, const std::string& body) {
  switch (kind) {
    case LinkKind::kAlive: return parse_link<LinkAlive>(body).has_value();
    case LinkKind::kBye:
      if (!parse_link<LinkBye>(body)) return false;
      peer.said_bye = true;
      writer_->stop_heartbeats(peer.slot);  // one that left reads no more
      // A node's bye says that its subtree ended, or that it ended early because the whole job
      // ends (its abort, its launcher's signal, which every node gets): its children need not
      // link with the root for it (one that does is watched there, take_hello); the root
      // watches those already linked with it.
      if (root_) adopt_children_of(peer.task);
      // Its last line: what the root asked of it and it did not answer, it never will.
      if (root_ && on_bye_) on_bye_(peer.task);
      if (!root_ && tree_.parent(peer.task) == self_) tell_ended(peer.task);
      return true;
    case LinkKind::kLost: {
      const auto lost = parse_link<LinkLoss>(body);
      return lost && take_loss(peer, *lost);
    }
    case LinkKind::kCosts: return !root_ && pass_costs_up(peer, body);  // the root's handler takes them
    case LinkKind::kEnded: {
      const auto ended = parse_link<LinkEnded>(body);
      return ended && take_ended(peer, ended->task);
    }
    default: return false;
  }
}

bool NodeLink::take_loss(Peer& peer, const LinkLoss& lost) {
  if (lost.task == self_ || lost.task == peer.task || lost.task < 0) return false;
  if (root_ || tree_.parent(peer.task) == self_) {
    // A report from below: a node of the sender's subtree lost a parent or child of its in the
    // tree. The root takes the loss as its own, naming the node that is gone; one already gone
    // (or left) is old news. Another node passes it on up.
    if (lost.task == 0 || !tree_.within(lost.reporter, peer.task) || !tree_.neighbours(lost.reporter, lost.task))
      return false;
    if (!root_) {
      report_up(format_link(lost));
      return true;
    }
    Peer* gone = find_peer(lost.task);
    // What it said before it went counts (a child's ended words), though this report was read
    // first; reading may find its end, and lose it so.
    if (gone && !gone->gone && gone->fd) take_what_waits(*gone);
    if (gone && !gone->gone && !gone->said_bye)
      lose(*gone, fmt::format("the hyrun of task {}, its tree {}, lost it: {}", lost.reporter,
                              tree_.parent(lost.task) == lost.reporter ? "parent" : "child", lost.why));
    return true;
  }
  const bool from_parent = peer.task == tree_.parent(self_) && peer.task != 0;
  if (peer.task != 0 && !from_parent) return false;  // a child reports to the root, not here
  if (peer.task == 0 && lost.task == 0) return false;
  // Who saw it, as the line says: the root (0) for its own word, whichever node saw it for a
  // word passed down the tree.
  const bool absorbed = report(Loss{lost.task, lost.host, lost.why, true, lost.reporter});
  if (Peer* neighbour = find_peer(lost.task); neighbour && !neighbour->gone) {
    if (neighbour->fd) take_what_waits(*neighbour);  // what it said before it went (a child's ended words) counts
    if (!neighbour->gone) close_quietly(*neighbour);
  }
  if (absorbed && lost.task == tree_.parent(self_)) adopt_children_of(lost.task);
  if (absorbed && tree_.parent(lost.task) == self_) pass_up_ended_children_of(lost.task);
  return true;
}

void NodeLink::adopt_children_of(int task) {
  if (root_) {
    // A child not linked with the root yet links once it sees its parent lost, and the root
    // waits for it. After a bye it links only on need (take_hello watches it then): the
    // parent's subtree had ended, or the whole job ends.
    // One that had said bye to the lost parent (ended_) never links.
    const bool lost = peers_[static_cast<std::size_t>(task)].gone;
    for (const int child : tree_.children(task))
      if (Peer* p = find_peer(child);
          p && !p->gone && !p->said_bye && !p->watched && (p->fd || (lost && !ended_.contains(child)))) {
        p->watched = true;
        p->heard = Clock::now();
        if (p->fd) writer_->start_heartbeats(p->slot);
        p->connect_by = p->heard + connect_limit();
        p->adopted_from = task;
        judge_by(p->fd ? p->heard : p->connect_by);
      }
    return;
  }
  if (task != tree_.parent(self_)) return;
  if (Peer* root = root_link(); root && !root->gone && !root->said_bye && !root->watched) {
    root->watched = true;
    root->heard = Clock::now();
    root->launching = false;  // past its launch: it relayed the parent's end
    writer_->start_heartbeats(root->slot);
    judge_by(root->heard);
    // What went up through the parent may have ended with it: the root hears it again (a
    // loss it knows is old news there), and which of this node's children ended, for its own
    // loss.
    for (const auto& report : reports_) send(*root, report);
    for (const auto& p : peers_)
      if (p.said_bye && p.direct == Peer::Direct::kNo && tree_.parent(p.task) == self_)
        send(*root, format_link(LinkEnded{p.task}));
  }
}

bool NodeLink::pass_costs_up(const Peer& peer, const std::string& body) {
  const auto costs = parse_link<LinkCosts>(body);
  if (!costs || tree_.parent(peer.task) != self_ || !tree_.within(costs->task, peer.task)) return false;
  send_up(body);
  return true;
}

void NodeLink::tell_ended(int child) {
  // Not worth a dial of the root: a parent that left said the whole job ends.
  Peer* up = find_peer(tree_.parent(self_));
  if (!up || !up->fd || up->gone || up->said_bye) up = find_peer(0);
  if (!up || !up->fd || up->gone || up->said_bye) return;
  send(*up, format_link(LinkEnded{child}));
  spdlog::debug("node link: told task {} that task {}, its tree child, ended", up->task, child);
}

bool NodeLink::take_ended(const Peer& peer, int task) {
  // From below only: the sender's child, or a node of its subtree passed up after a loss.
  if (task <= 0 || task == peer.task || !tree_.within(task, peer.task) || (!root_ && tree_.parent(peer.task) != self_))
    return false;
  if (!root_ && tree_.parent(task) != peer.task) {
    report_up(format_link(LinkEnded{task}));  // a lost node's child: for the root, which adopts it
    return true;
  }
  // At the root, one passed up is of a node whose parent the root took for lost (that loss went
  // up ahead of it); one that comes while the job ends is old news.
  if (root_ && tree_.parent(task) != peer.task && !absorbed_.contains(tree_.parent(task))) {
    // Old news where the parent left here first (its bye, which the passer missed) or the job
    // ends; a lie where the parent is live.
    const Peer* parent = find_peer(tree_.parent(task));
    return lost_ || (parent && (parent->said_bye || parent->gone));
  }
  ended_.insert(task);
  if (!root_) return true;
  // Adopted already (the word came after the loss): it will not link, and is not waited for.
  if (Peer* p = find_peer(task); p && !p->fd && !p->gone && !p->said_bye && p->adopted_from >= 0) {
    spdlog::debug("node link: the hyrun of task {} had ended before its tree parent (task {}) was lost", task,
                  p->adopted_from);
    p->said_bye = true;
  }
  return true;
}

void NodeLink::pass_up_ended_children_of(int task) {
  for (const int child : tree_.children(task))
    if (ended_.erase(child) > 0) report_up(format_link(LinkEnded{child}));
}

void NodeLink::unreached_on_own(const Peer& peer) {
  if (!on_unreachable_) return;
  // A node's answers come back on its own connection; a connect that failed delivered nothing.
  if (!root_ || peer.connecting) return on_unreachable_(peer.task);
  // The holder answers the root on its own link, which may still be in its making (it closes
  // the root's connection at its end, before its last lines to the root are read): its bye or
  // loss there settles what it was asked; if it has not linked within the connect limit, it
  // never will.
  const Peer* own = find_peer(peer.task);
  if (own && (own->fd || own->gone)) return;
  awaited_answers_[peer.task] = Clock::now() + connect_limit();
  judge_by(awaited_answers_[peer.task]);
}

void NodeLink::report_up(const std::string& body) {
  reports_.push_back(body);
  send_up(body);
}

void NodeLink::send_up(const std::string& body) {
  if (root_) return;
  Peer* up = find_peer(tree_.parent(self_));
  if (!up || !up->fd || up->gone || up->said_bye) up = root_link();
  if (up && up->fd && !up->gone) send(*up, body);
}

void NodeLink::on(LinkKind kind, Handler handler) {
  if (kind == LinkKind::kAlive || kind == LinkKind::kBye || kind == LinkKind::kLost || kind == LinkKind::kEnded)
    throw Error(fmt::format("the node link takes its {} lines itself", link_kind_word(kind)));
  handlers_[kind] = std::move(handler);
}

void NodeLink::broadcast(std::string body) {
  if (!root_) root_link();  // another node's broadcast goes to the root alone
  const auto shared = std::make_shared<const std::string>(std::move(body));  // one copy for every peer's queue
  for (auto& peer : peers_)
    if ((root_ || peer.task == 0) && peer.direct == Peer::Direct::kNo && peer.fd && !peer.gone && !peer.said_bye &&
        !writer_->send(peer.slot, shared)) {
      peer.overflowed = true;
      judge_by(Clock::now());
    }
}

// A message the writer cannot queue is not dropped in silence: the peer is lost at the next
// tick (not here, inside whatever is sending), and the job learns why.
void NodeLink::send(Peer& peer, const std::string& line) {
  if (writer_->send(peer.slot, line)) return;
  peer.overflowed = true;
  judge_by(Clock::now());
}

bool NodeLink::send_to(int task, const std::string& body) {
  Peer* peer = task == 0 ? root_link() : find_peer(task);
  if (!peer || !peer->fd || peer->gone) return false;
  send(*peer, body);
  return true;
}

NodeLink::Clock::time_point NodeLink::wake_by() const { return next_judgement_; }

NodeLink::Clock::time_point NodeLink::next_deadline() const {
  auto t = Clock::now() + silence_limit_;
  if (root_unreachable_) return Clock::now();
  for (const auto& [task, by] : awaited_answers_) t = std::min(t, by);
  for (const auto& p : peers_) {
    if (!p.gone && p.overflowed) return Clock::now();
    if (p.gone || p.said_bye) continue;
    if (!p.fd) {
      if (p.watched) t = std::min(t, p.connect_by);
    } else if (p.watched || p.connecting)
      t = std::min(t, p.heard + silence_limit_of(p));
  }
  for (const auto& p : unidentified_)
    if (!p.gone) t = std::min(t, p.heard + hello_limit());
  if (listener_ && accept_paused_until_ > Clock::now()) t = std::min(t, accept_paused_until_);
  return t;
}

// A peer past its limit may have sent in time while this hyrun was away from its loop (busy,
// or starved of CPU on a loaded machine): what waits in its socket is taken first, so that this
// hyrun's own lateness is never the peer's silence.
void NodeLink::take_what_waits(Peer& peer) {
  // A line taken from `peer` may lead here for another (take_loss): the one being read is left
  // to its own loop, whose buffer holds lines not cut off yet.
  if (peer.reading) return;
  pollfd p{peer.fd.get(), static_cast<short>(POLLIN | (peer.connecting ? POLLOUT : 0)), 0};
  if (::poll(&p, 1, 0) > 0) on_ready(peer, p.revents);
}

std::chrono::milliseconds NodeLink::silence_limit_of(const Peer& peer) const {
  return peer.launching && !peer.connecting ? std::max(silence_limit_, launch_limit_) : silence_limit_;
}

std::chrono::milliseconds NodeLink::connect_limit() const {
  return std::max({std::chrono::milliseconds(kConnectLimit), silence_limit_, launch_limit_});
}

std::string NodeLink::silence_of(const Peer& peer) const {
  if (peer.connecting) return fmt::format("cannot connect: no answer within {}", seconds_text(silence_limit_));
  if (silence_limit_of(peer) > silence_limit_)
    return fmt::format(
        "it said nothing within {} of this node's connection (--bootstrap-timeout): its hyrun is stopped, or has not "
        "finished its launch",
        seconds_text(silence_limit_of(peer)));
  return fmt::format("silent for {} (--node-timeout): its node is off the network or its hyrun is stopped",
                     seconds_text(silence_limit_));
}

void NodeLink::on_tick() {
  const auto now = Clock::now();
  if (now >= next_judgement_) {
    judge_peers(now);
    next_judgement_ = next_deadline();
  }
  refusals_.flush(now);
  accept_failures_.flush(now);
}

void NodeLink::judge_peers(Clock::time_point now) {
  // By index: what a peer's lines do may add peers (a deque keeps references, not iterators).
  for (std::size_t i = 0; i < peers_.size(); ++i) {
    Peer& p = peers_[i];
    if (p.fd && !p.gone && !p.overflowed && (p.watched || p.connecting) && now - p.heard >= silence_limit_of(p))
      take_what_waits(p);
    if (!p.gone && p.overflowed) {
      lose(p, fmt::format("it took none of the {} MiB queued for it on the node link: its hyrun reads nothing",
                          writer_->max_queued() >> 20));
      continue;
    }
    if (p.gone || p.said_bye) continue;
    if (!p.fd && p.watched && now >= p.connect_by)
      lose(p, p.adopted_from < 0
                  ? fmt::format("it did not connect within {} of the fence", seconds_text(connect_limit()))
                  : fmt::format("it did not connect within {} of the loss of its tree parent (task {}): it was "
                                "lost with it, or had ended before",
                                seconds_text(connect_limit()), p.adopted_from));
    else if (p.fd && (p.watched || p.connecting) && Clock::now() - p.heard >= silence_limit_of(p))
      lose(p, silence_of(p));
  }
  if (root_unreachable_) report(*std::exchange(root_unreachable_, std::nullopt));
  for (auto it = awaited_answers_.begin(); it != awaited_answers_.end();) {
    const Peer* own = find_peer(it->first);
    const bool settled = own && (own->fd || own->gone);  // linked: its bye or loss says it
    if (!settled && now < it->second) {
      ++it;
      continue;
    }
    const int task = it->first;
    it = awaited_answers_.erase(it);
    if (!settled && on_unreachable_) on_unreachable_(task);
  }
  for (auto& p : unidentified_)
    if (p.fd && !p.gone && now - p.heard >= hello_limit()) {
      take_what_waits(p);  // a hello read here moves the peer out (its fd taken)
      if (p.fd && !p.gone) {
        spdlog::debug("node link: closed a connection that sent no hello within {} of its accept",
                      seconds_text(hello_limit()));
        close_quietly(p);
      }
    }
  std::erase_if(unidentified_, [](const Peer& q) { return !q.fd || q.gone; });
}

void NodeLink::lose(Peer& peer, const std::string& why) {
  if (peer.direct != Peer::Direct::kNo) {
    // Not a loss: liveness is the tree's. What this node asked there fails (the relay).
    spdlog::debug("node link: the direct modex connection {} task {} ended: {}",
                  peer.direct == Peer::Direct::kOut ? "to" : "from", peer.task, why);
    close_quietly(peer);
    if (peer.direct == Peer::Direct::kOut) unreached_on_own(peer);
    return;
  }
  peer.gone = true;
  writer_->remove(peer.slot);
  unwatch(peer);
  peer.fd.reset();
  const Loss loss{peer.task, peer.host, why, false, 0};
  const LinkLoss line{loss.task, self_, loss.host, why.substr(0, 100)};
  if (!root_ && loss.task != 0) {
    // A parent or child in the tree: the root decides, as it did when it watched every node,
    // and names the node that is gone. This node watches the root until it hears (first, so
    // that the report goes to the root when the parent is the one lost).
    if (loss.task == tree_.parent(self_)) adopt_children_of(loss.task);
    report_up(format_link(line));
    if (tree_.parent(loss.task) == self_) pass_up_ended_children_of(loss.task);
    return;
  }
  const bool absorbed = report(loss);
  if (!absorbed) return;
  adopt_children_of(loss.task);
  // The job goes on without the node: the others' ranks must learn of its ranks' deaths too,
  // a node that links later as well (take_hello).
  if (root_) {
    told_.push_back(format_link(line));
    broadcast(told_.back());
  }
}

bool NodeLink::report(const Loss& loss) {
  if (lost_) return false;                         // the job is already ending
  if (absorbed_.contains(loss.task)) return true;  // the word came another way too
  const bool absorbed = on_loss_ && on_loss_(loss);
  if (absorbed)
    absorbed_.insert(loss.task);
  else
    lost_ = true;
  // The word goes down the tree, whichever way it came (the root, or this node's parent): the
  // children may not be linked with the root, or not yet. A loss that ends the job, this node
  // ends too, and so must they.
  if (!root_) {
    const LinkLoss line{loss.task, loss.relayed ? loss.reporter : self_, loss.host, loss.why.substr(0, 100)};
    if (absorbed) told_.push_back(format_link(line));  // for a child that links later
    for (auto& p : peers_)
      if (p.task != 0 && p.task != loss.task && tree_.parent(p.task) == self_ && p.direct == Peer::Direct::kNo &&
          p.fd && !p.gone && !p.said_bye)
        send(p, format_link(line));
  }
  return absorbed;
}

void NodeLink::close_quietly(Peer& peer) {
  peer.gone = true;
  if (peer.task >= 0) writer_->remove(peer.slot);
  unwatch(peer);
  peer.fd.reset();
}

void NodeLink::say_bye() {
  // ask()'s connections just close: their end is never a loss.
  for (auto& p : peers_)
    if (p.fd && !p.gone && p.direct != Peer::Direct::kNo) close_quietly(p);
  for (auto& p : peers_)
    if (p.fd && !p.gone) {
      send(p, format_link(LinkBye{}));
      writer_->stop_heartbeats(p.slot);
    }
  // A short job may end before its connect completed or its hello left: finish them,
  // bounded, or the root would take this node's end for a loss.
  const auto end = Clock::now() + std::min<Clock::duration>(kByeLimit, silence_limit_);
  for (;;) {
    std::vector<pollfd> fds;
    for (const auto& p : peers_)
      if (p.fd && !p.gone && (p.connecting || writer_->wants_out(p.slot))) fds.push_back({p.fd.get(), POLLOUT, 0});
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
    writer_->connected(p.slot);
  }
  if (revents & (POLLERR | POLLHUP)) return close_quietly(p);
  writer_->flush(p.slot);
  if (writer_->wants_out(p.slot) && !(revents & POLLOUT)) close_quietly(p);
}

void NodeLink::service() {
  std::vector<pollfd> fds;
  add_poll_fds(fds);
  if (::poll(fds.data(), fds.size(), 0) > 0)
    for (const auto& p : fds)
      if (p.revents) on_poll(p);
  on_tick();
}

bool NodeLink::awaited(const Peer& p) const {
  // The root: its children, the nodes it adopted, and any node linked with it.
  return p.direct == Peer::Direct::kNo && !p.gone && !p.said_bye &&
         (root_ ? p.watched || p.fd : tree_.parent(p.task) == self_);
}

bool NodeLink::await_byes(SignalEvents& signals) {
  const auto waiting = [this] {
    return std::any_of(peers_.begin(), peers_.end(), [this](const Peer& p) { return awaited(p); });
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
