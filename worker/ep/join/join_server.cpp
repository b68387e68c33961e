#include "join_server.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "hyrun/common/error.hpp"

namespace hyrun::ep::elastic {
namespace {

/// Out of descriptors, with nothing to shed: accept rests this long instead of spinning.
constexpr std::chrono::milliseconds kAcceptRest{100};
/// New connections taken per turn of the loop, so that those waiting are read in between.
constexpr int kAcceptsPerTurn = 64;

/// A launch's host that stops answering (powered off, cut off) ends its connection within
/// about 25 s; the kernel answers keepalives however busy the host is.
void keep_alive(int fd) {
  const int on = 1, idle_s = 10, interval_s = 5, probes = 3;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof interval_s);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
}

std::string address_of(const sockaddr_storage& from) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (from.ss_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&from)->sin_addr, host, sizeof host);
  else if (from.ss_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&from)->sin6_addr, host, sizeof host);
  return host;
}

}  // namespace

JoinServer::JoinServer(int port, std::string token, join::Grant grant, std::string root_host, RankPool& pool)
    : token_(std::move(token)), grant_(std::move(grant)), pool_(pool) {
  nodes_[root_host] = 0;
  listen_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listen_) throw SystemError("join server: socket", errno);
  const int one = 1;
  ::setsockopt(listen_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(static_cast<uint16_t>(port));
  // The longest backlog the kernel allows: connections arriving in a burst wait there, not
  // in the client's SYN retries.
  if (::bind(listen_.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listen_.get(), SOMAXCONN) != 0)
    throw SystemError(fmt::format("join server: listening on TCP port {} (give a free one with --port)", port), errno);
  socklen_t length = sizeof address;
  ::getsockname(listen_.get(), reinterpret_cast<sockaddr*>(&address), &length);
  port_ = ntohs(address.sin_port);
  thread_ = std::thread([this] { serve(); });
}

JoinServer::~JoinServer() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void JoinServer::serve() {
  std::vector<pollfd> fds;
  while (!stop_) {
    refusals_.flush();
    auto now = join::Clock::now();
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (it->deadline > now) {
        ++it;
        continue;
      }
      refusals_.warn(fmt::format("join server: closed a connection from {} that sent no request within {} s", it->peer,
                                 kRequestDeadline.count()));
      it = drop(it);
    }
    fds.assign(1, pollfd{listen_.get(), static_cast<short>(now >= accept_again_ ? POLLIN : 0), 0});
    for (const auto& g : granted_) fds.push_back({g.fd.get(), POLLIN, 0});
    for (const auto& w : waiting_) fds.push_back({w.fd.get(), POLLIN, 0});
    if (::poll(fds.data(), fds.size(), 100) <= 0) continue;
    auto fd = fds.begin() + 1;
    // Ended launches first: their ranks are free before any request read in this turn.
    for (auto it = granted_.begin(); it != granted_.end(); ++fd) {
      if (fd->revents == 0) {
        ++it;
        continue;
      }
      launch_ended(*it);
      it = granted_.erase(it);
    }
    for (auto it = waiting_.begin(); it != waiting_.end(); ++fd) {
      const bool done = fd->revents != 0 && read_from(*it);
      it = done ? drop(it) : std::next(it);
    }
    if (fds[0].revents & POLLIN) accept_new();
  }
}

void JoinServer::accept_new() {
  for (int i = 0; i < kAcceptsPerTurn; ++i) {
    sockaddr_storage from{};
    socklen_t length = sizeof from;
    UniqueFd fd(::accept4(listen_.get(), reinterpret_cast<sockaddr*>(&from), &length, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (fd) {
      admit(std::move(fd), address_of(from));
      continue;
    }
    const int e = errno;
    if (e == EAGAIN || e == EWOULDBLOCK) return;
    if (e == EINTR || e == ECONNABORTED) continue;
    // Out of descriptors or memory: the connection stays in the backlog, and accept would
    // fail again at once. Make room by shedding a waiting connection, else rest.
    if ((e == EMFILE || e == ENFILE) && shed("this process is out of file descriptors")) continue;
    refusals_.warn(
        fmt::format("join server: accept: {}; accepting again in {} ms", std::strerror(e), kAcceptRest.count()));
    accept_again_ = join::Clock::now() + kAcceptRest;
    return;
  }
}

void JoinServer::admit(UniqueFd fd, const std::string& peer) {
  if (per_peer_[peer] >= kMaxWaitingPerPeer)
    shed_oldest_of(peer, fmt::format("{} connections from it were waiting", kMaxWaitingPerPeer));
  else if (waiting_.size() >= kMaxWaiting)
    shed(fmt::format("{} connections were waiting", kMaxWaiting));
  Waiting w{std::move(fd), peer, join::new_nonce(), {}, join::Clock::now() + kRequestDeadline};
  try {
    join::write_all(w.fd.get(), join::greeting(w.nonce), "join server: the greeting");
  } catch (const Error& e) {  // a fresh socket's buffer takes the greeting, unless the peer is gone
    spdlog::debug("join server: {} left before its greeting: {}", peer, e.what());
    return;
  }
  waiting_.push_back(std::move(w));
  ++per_peer_[peer];
}

JoinServer::WaitingList::iterator JoinServer::drop(WaitingList::iterator it) {
  if (const auto p = per_peer_.find(it->peer); p != per_peer_.end() && --p->second == 0) per_peer_.erase(p);
  return waiting_.erase(it);
}

void JoinServer::shed_oldest_of(const std::string& peer, const std::string& why) {
  const auto it = std::find_if(waiting_.begin(), waiting_.end(), [&](const Waiting& w) { return w.peer == peer; });
  if (it == waiting_.end()) return;
  refusals_.warn(fmt::format("join server: closed the oldest waiting connection from {} ({})", peer, why));
  drop(it);
}

bool JoinServer::shed(const std::string& why) {
  if (waiting_.empty()) return false;
  const auto most = std::max_element(per_peer_.begin(), per_peer_.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
  shed_oldest_of(most->first, why);
  return true;
}

bool JoinServer::read_from(Waiting& w) {
  char buffer[1024];
  for (;;) {
    const ssize_t got = ::recv(w.fd.get(), buffer, sizeof buffer, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    if (got < 0) {
      refusals_.warn(fmt::format("join server: a connection from {} failed: {}", w.peer, std::strerror(errno)));
      return true;
    }
    if (got == 0) {
      if (w.line.empty())
        spdlog::debug("join server: {} connected and closed (a readiness probe)", w.peer);
      else
        refusals_.warn(fmt::format("join server: a connection from {} closed in the middle of its request", w.peer));
      return true;
    }
    const std::string_view part(buffer, static_cast<std::size_t>(got));
    const auto newline = part.find('\n');
    w.line.append(part.substr(0, newline));
    if (w.line.size() > join::kMaxLine) {
      refusals_.warn(
          fmt::format("join server: a connection from {} sent a line longer than {} bytes", w.peer, join::kMaxLine));
      return true;
    }
    if (newline != std::string_view::npos) {
      answer(w);
      return true;
    }
  }
}

void JoinServer::answer(Waiting& w) {
  const std::string what = fmt::format("join server: the answer to {}", w.peer);
  const auto refuse = [&](const std::string& why) {
    refusals_.warn(fmt::format("join server: refused a join from {}: {}", w.peer, why));
    try {
      join::write_all(w.fd.get(), join::format_refusal(why), what);
    } catch (const Error&) {  // the peer is gone: nothing else to tell it
    }
  };
  const auto request = join::parse_request(w.line);
  // Never the line itself: anyone can send it, and text such as CloudAI's failure patterns
  // or terminal escapes would land in the job's log (and go back out as a reflection).
  if (!request) return refuse(fmt::format("a line of {} bytes that is not the join protocol", w.line.size()));
  if (!join::proves(*request, token_, w.nonce))
    return refuse("its proof does not match this job's token (a launch of another job, or a wrong token file)");
  Placement placement;
  try {
    placement = pool_.take(request->count, request->host);
  } catch (const Error& e) {
    return refuse(e.what());
  }
  join::Grant grant = grant_;
  grant.ranks = placement.ranks;
  grant.local_ranks = placement.local_ranks;
  const auto [it, added] = nodes_.emplace(request->host, static_cast<int>(nodes_.size()));
  grant.node_rank = it->second;
  try {
    // A grant fits a fresh socket's buffer; one that does not go out whole goes to nobody.
    join::write_all(w.fd.get(), join::format_grant(grant), what);
  } catch (const Error& e) {
    for (int r : grant.ranks) pool_.release(r);  // nobody will run them
    spdlog::warn("join server: host {} ({}) was given rank(s) {}, but the answer failed ({}); they are free again",
                 request->host, w.peer, fmt::join(grant.ranks, ", "), e.what());
    return;
  }
  spdlog::info("join server: host {} ({}) joins with rank(s) {}", request->host, w.peer, fmt::join(grant.ranks, ", "));
  keep_alive(w.fd.get());
  granted_.push_back({std::move(w.fd), w.peer, request->host, grant.ranks});
}

void JoinServer::launch_ended(const Granted& g) {
  char byte;
  const ssize_t got = ::recv(g.fd.get(), &byte, 1, MSG_DONTWAIT);
  const std::string how = got > 0    ? "sent bytes after its grant"
                          : got == 0 ? "ended"
                                     : fmt::format("lost its connection ({})", std::strerror(errno));
  const auto given = pool_.give_back_pending(g.ranks);
  if (given.empty())
    spdlog::debug("join server: the launch on host {} ({}) {}", g.host, g.peer, how);
  else
    spdlog::warn("join server: the launch on host {} ({}) {} before rank(s) {} joined; another launch may bring them",
                 g.host, g.peer, how, fmt::join(given, ", "));
}

}  // namespace hyrun::ep::elastic
