#include "join_server.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "hyrun/common/error.hpp"

namespace hyrun::ep::elastic {
namespace {
/// Each connection gets this long for its request: a silent or slow client cannot hold
/// the server (and the launches behind it) for longer.
constexpr std::chrono::seconds kRequestDeadline{3};
}  // namespace

RankPool::RankPool(int first_free, int world_size, const std::string& root_host)
    : next_(first_free), world_size_(world_size) {
  for (int r = 0; r < first_free; ++r) {
    where_[r] = {root_host, r};
    busy_[root_host].insert(r);
  }
}

Placement RankPool::take(int count, const std::string& host) {
  std::lock_guard lock(mutex_);
  const int available = static_cast<int>(released_.size()) + (world_size_ - next_);
  if (count > available)
    throw Error(
        fmt::format("the plan has {} rank(s) left to give (released: [{}], never given: {} of {}), this launch "
                    "asks for {}",
                    available, fmt::join(released_, ", "), world_size_ - next_, world_size_, count));
  Placement placement;
  auto& busy = busy_[host];
  int slot = 0;
  while (static_cast<int>(placement.ranks.size()) < count) {
    int rank;
    if (!released_.empty()) {
      rank = *released_.begin();
      released_.erase(released_.begin());
    } else {
      rank = next_++;
    }
    while (busy.contains(slot)) ++slot;
    busy.insert(slot);
    where_[rank] = {host, slot};
    placement.ranks.push_back(rank);
    placement.local_ranks.push_back(slot);
  }
  return placement;
}

void RankPool::release(int rank) {
  std::lock_guard lock(mutex_);
  released_.insert(rank);
  if (const auto it = where_.find(rank); it != where_.end()) {
    busy_[it->second.first].erase(it->second.second);
    where_.erase(it);
  }
}

JoinServer::JoinServer(int port, std::string token, join::Grant grant, std::string root_host, RankPool& pool)
    : token_(std::move(token)), grant_(std::move(grant)), pool_(pool) {
  nodes_[root_host] = 0;
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw SystemError("join server: socket", errno);
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || ::listen(listen_fd_, 64) != 0) {
    const int e = errno;
    ::close(listen_fd_);
    throw SystemError(fmt::format("join server: listening on TCP port {} (give a free one with --port)", port), e);
  }
  socklen_t length = sizeof address;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
  port_ = ntohs(address.sin_port);
  thread_ = std::thread([this] { serve(); });
}

JoinServer::~JoinServer() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
}

void JoinServer::serve() {
  while (!stop_) {
    refusals_.flush();
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    sockaddr_storage from{};
    socklen_t length = sizeof from;
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &length, SOCK_CLOEXEC);
    if (fd < 0) continue;
    char host[INET6_ADDRSTRLEN] = "?";
    if (from.ss_family == AF_INET)
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&from)->sin_addr, host, sizeof host);
    try {
      handle(fd, host);
    } catch (const std::exception& e) {
      // Anyone can connect: nothing a client does may end the server or the job.
      refusals_.warn(fmt::format("join server: a connection from {} failed: {}", host, e.what()));
    }
    ::close(fd);
  }
}

void JoinServer::handle(int fd, const std::string& peer) {
  const auto deadline = join::Clock::now() + kRequestDeadline;
  const std::string what = fmt::format("join server: the request from {}", peer);
  const std::string nonce = join::new_nonce();
  join::write_all(fd, join::greeting(nonce), what);
  const auto line = join::read_line(fd, deadline, what);
  if (!line) {
    spdlog::debug("join server: {} connected and closed (a readiness probe)", peer);
    return;
  }
  const auto refuse = [&](const std::string& why) {
    refusals_.warn(fmt::format("join server: refused a join from {}: {}", peer, why));
    join::write_all(fd, join::format_refusal(why), what);
  };
  const auto request = join::parse_request(*line);
  // Never the line itself: anyone can send it, and text such as CloudAI's failure patterns
  // or terminal escapes would land in the job's log (and go back out as a reflection).
  if (!request) return refuse(fmt::format("a line of {} bytes that is not the join protocol", line->size()));
  if (!join::proves(*request, token_, nonce))
    return refuse("its proof does not match this job's token (a launch of another job, or a wrong token file)");
  Placement placement;
  try {
    placement = pool_.take(request->count, request->host);
  } catch (const Error& e) {
    return refuse(e.what());
  }
  const auto& ranks = placement.ranks;
  join::Grant grant = grant_;
  grant.ranks = ranks;
  grant.local_ranks = placement.local_ranks;
  const auto [it, added] = nodes_.emplace(request->host, static_cast<int>(nodes_.size()));
  grant.node_rank = it->second;
  spdlog::info("join server: host {} ({}) joins with rank(s) {}", request->host, peer, fmt::join(ranks, ", "));
  try {
    join::write_all(fd, join::format_grant(grant), what);
  } catch (const Error&) {
    for (int r : ranks) pool_.release(r);  // nobody will run them
    throw;
  }
}

}  // namespace hyrun::ep::elastic
