#include "join_protocol.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "hyrun/common/error.hpp"
#include "hyrun/common/hex.hpp"
#include "hyrun/common/hmac_sha256.hpp"
#include "hyrun/common/nonce.hpp"
#include "hyrun/common/unique_fd.hpp"

namespace hyrun::ep::elastic::join {
namespace {

constexpr std::string_view kVersion = "v2";
constexpr std::string_view kGreeting = "hyrun-ep-join v2 ";

bool is_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

/// "vN" of the greeting of any version of the protocol (digits only: nothing else of a
/// peer's line is ever repeated), or empty.
std::string_view version_of(std::string_view line) {
  constexpr std::string_view prefix = "hyrun-ep-join v";
  if (!line.starts_with(prefix)) return {};
  const auto digits = line.substr(prefix.size(), line.find(' ', prefix.size()) - prefix.size());
  if (digits.empty() || digits.size() > 3 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return {};
  return line.substr(prefix.size() - 1, digits.size() + 1);
}

/// A waiting client checks for a stop signal this often.
constexpr int kStopCheckMs = 100;
/// Between two attempts to reach a server that is not (yet) there.
constexpr std::chrono::milliseconds kRetryPause{200};

/// Sleeps until `until`, checking for a stop signal.
void pause_before(Clock::time_point until, const StopCheck& check_stop) {
  for (auto now = Clock::now(); now < until; now = Clock::now()) {
    if (check_stop) check_stop();
    std::this_thread::sleep_for(std::min<Clock::duration>(until - now, std::chrono::milliseconds(kStopCheckMs)));
  }
}

/// A socket connected to one of `addresses` before `deadline`, or none (the reason in
/// `last_error`). Never a blocking connect(): a server whose backlog is full drops the
/// handshake, and the kernel would retry it for minutes.
UniqueFd connect_before(const addrinfo* addresses, Clock::time_point deadline, const StopCheck& check_stop,
                        std::string& last_error) {
  for (const addrinfo* a = addresses; a; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!fd) {
      last_error = std::strerror(errno);
      continue;
    }
    int error = ::connect(fd.get(), a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    while (error == EINPROGRESS || error == EINTR) {
      if (check_stop) check_stop();
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) {
        error = ETIMEDOUT;
        break;
      }
      pollfd p{fd.get(), POLLOUT, 0};
      if (::poll(&p, 1, static_cast<int>(std::min<long long>(left, kStopCheckMs))) <= 0) continue;
      socklen_t length = sizeof error;
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
    }
    if (error == 0) {
      // Blocking again: every later read and write is bounded by poll.
      ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
      return fd;
    }
    last_error = std::strerror(error);
  }
  return {};
}

}  // namespace

std::string new_nonce() { return hyrun::new_nonce("the join server's nonce"); }

std::string greeting(const std::string& nonce) { return fmt::format("{}{}\n", kGreeting, nonce); }

std::optional<std::string> parse_greeting(std::string_view line) {
  if (!line.starts_with(kGreeting)) {
    if (const auto version = version_of(line); !version.empty())
      throw Error(
          fmt::format("the join server speaks {} of the join protocol, this ep-elastic {}: give every launch "
                      "of a job the same build of ep-elastic",
                      version, kVersion));
    return std::nullopt;
  }
  line.remove_prefix(kGreeting.size());
  if (line.size() != 32 || !is_hex(line)) return std::nullopt;
  return std::string(line);
}

std::string proof(const std::string& token, const std::string& nonce, int count, const std::string& host) {
  return to_hex(hmac_sha256(token, fmt::format("{}{} {} {}", kGreeting, nonce, count, host)));
}

std::string format_request(const Request& r) { return fmt::format("join {} {} {}\n", r.count, r.host, r.proof); }

std::optional<Request> parse_request(std::string_view line) {
  if (!line.starts_with("join ")) return std::nullopt;
  line.remove_prefix(5);
  const auto a = line.find(' ');
  if (a == std::string_view::npos) return std::nullopt;
  const auto b = line.find(' ', a + 1);
  if (b == std::string_view::npos) return std::nullopt;
  Request r;
  const auto count = line.substr(0, a);
  const auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), r.count);
  if (ec != std::errc() || end != count.data() + count.size() || r.count < 1 || r.count > kMaxRanksPerJoin)
    return std::nullopt;
  r.host = std::string(line.substr(a + 1, b - a - 1));
  r.proof = std::string(line.substr(b + 1));
  const bool host_ok = !r.host.empty() && r.host.size() <= 255 && std::all_of(r.host.begin(), r.host.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
  });
  if (!host_ok || r.proof.size() != 64 || !is_hex(r.proof)) return std::nullopt;
  return r;
}

bool proves(const Request& request, const std::string& token, const std::string& nonce) {
  return equal_in_constant_time(proof(token, nonce, request.count, request.host), request.proof);
}

std::string format_grant(const Grant& g) {
  const nlohmann::json j{{"ranks", g.ranks},           {"local_ranks", g.local_ranks},
                         {"world_size", g.world_size}, {"launch_ranks", g.launch_ranks},
                         {"node_rank", g.node_rank},   {"root_address", g.root_address}};
  return fmt::format("ok {}\n", j.dump());
}

std::string format_refusal(const std::string& why) {
  std::string line = why;
  std::replace(line.begin(), line.end(), '\n', ' ');
  return fmt::format("refused {}\n", line);
}

Grant parse_reply(std::string_view line, const std::string& server) {
  if (line.starts_with("refused "))
    throw Error(fmt::format("the join server at {} refused this launch: {}", server, line.substr(8)));
  const auto bad = [&](const std::string& what) {
    return Error(fmt::format("the join server at {} sent a malformed reply ({}): '{:.80}'", server, what, line));
  };
  if (!line.starts_with("ok ")) throw bad("neither ok nor refused");
  const auto j = nlohmann::json::parse(line.substr(3), nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw bad("not JSON");
  Grant g;
  try {
    g.ranks = j.at("ranks").get<std::vector<int>>();
    g.local_ranks = j.at("local_ranks").get<std::vector<int>>();
    g.world_size = j.at("world_size").get<int>();
    g.launch_ranks = j.at("launch_ranks").get<int>();
    g.node_rank = j.at("node_rank").get<int>();
    g.root_address = j.at("root_address").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw bad(e.what());
  }
  if (g.ranks.empty() || g.world_size < 1 || g.launch_ranks < 1 || g.launch_ranks > g.world_size || g.node_rank < 0 ||
      g.root_address.empty() || !is_hex(g.root_address))
    throw bad("values out of range");
  for (int r : g.ranks)
    if (r < 1 || r >= g.world_size) throw bad(fmt::format("rank {} outside the world of {}", r, g.world_size));
  if (g.local_ranks.size() != g.ranks.size()) throw bad("local_ranks and ranks differ in length");
  for (int l : g.local_ranks)
    if (l < 0 || l > kMaxRanksPerJoin * 4) throw bad(fmt::format("local rank {} out of range", l));
  return g;
}

std::optional<std::string> read_line(int fd, Clock::time_point deadline, const std::string& what,
                                     const StopCheck& check_stop) {
  std::string line;
  char c;
  for (;;) {
    if (check_stop) check_stop();
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) throw TimeoutError(fmt::format("{}: no complete line in time", what));
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, kStopCheckMs)));
    if (n < 0 && errno != EINTR) throw SystemError(fmt::format("{}: poll", what), errno);
    if (n <= 0) continue;
    // One byte at a time: the lines are short and nothing after the newline may be taken.
    const ssize_t got = ::recv(fd, &c, 1, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got < 0) throw SystemError(fmt::format("{}: recv", what), errno);
    if (got == 0) return std::nullopt;
    if (c == '\n') return line;
    if (line.size() >= kMaxLine) throw Error(fmt::format("{}: a line longer than {} bytes", what, kMaxLine));
    line.push_back(c);
  }
}

void write_all(int fd, std::string_view text, const std::string& what) {
  while (!text.empty()) {
    const ssize_t n = ::send(fd, text.data(), text.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw SystemError(fmt::format("{}: send", what), errno);
    text.remove_prefix(static_cast<std::size_t>(n));
  }
}

Membership request_ranks(const std::string& server, int port, const std::string& token, int count,
                         const std::string& host, std::chrono::milliseconds timeout, const StopCheck& check_stop) {
  const auto deadline = Clock::now() + timeout;
  const std::string where = fmt::format("{}:{}", server, port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(server.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
    throw UsageError(fmt::format("--tcp-server {}: cannot resolve it: {}", server, gai_strerror(rc)));
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owner(found, &::freeaddrinfo);
  const std::string what = fmt::format("joining through {}", where);
  std::string last_error = "none";
  for (;;) {
    if (UniqueFd s = connect_before(found, deadline, check_stop, last_error)) {
      // Greeted, asked, answered; a connection the server shed before answering is tried again.
      last_error = "the server closed the connection before it answered";
      std::optional<std::string> reply;
      try {
        if (const auto hello = read_line(s.get(), deadline, what, check_stop)) {
          const auto nonce = parse_greeting(*hello);
          if (!nonce) throw Error(fmt::format("{}: the server there is not an ep-elastic join server", what));
          write_all(s.get(), format_request({count, host, proof(token, *nonce, count, host)}), what);
          reply = read_line(s.get(), deadline, what, check_stop);
        }
      } catch (const SystemError& e) {  // reset by the server: as a close
        last_error = e.what();
      }
      if (reply) {
        Grant g = parse_reply(*reply, where);
        if (static_cast<int>(g.ranks.size()) != count)
          throw Error(fmt::format("{}: asked for {} ranks, got {}", what, count, g.ranks.size()));
        return {std::move(g), std::move(s)};
      }
    }
    if (Clock::now() + kRetryPause > deadline)
      throw TimeoutError(
          fmt::format("no join server answered at {} within {} ms (last error: {}); is the first launch "
                      "(without --tcp-server) running there with the same --port?",
                      where, timeout.count(), last_error));
    pause_before(Clock::now() + kRetryPause, check_stop);
  }
}

}  // namespace hyrun::ep::elastic::join
