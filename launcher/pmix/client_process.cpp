#include "hyrun/pmix/client_process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "hyrun/common/error.hpp"
#include "hyrun/common/hex.hpp"
#include "hyrun/pmix/client.hpp"

extern char** environ;

namespace hyrun::pmix {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// A request or reply is one datagram; the largest is a record got from another task.
constexpr std::size_t kMaxMessage = 4 << 20;
// Beyond a call's own limit (which the helper enforces), how long hyrun waits for its reply.
constexpr auto kReplySlack = std::chrono::seconds(10);
// The end of the helper (PMIx_Finalize).
constexpr auto kEndLimit = std::chrono::seconds(5);

void send_message(int fd, const json& message) {
  const std::string text = message.dump();
  while (::send(fd, text.data(), text.size(), MSG_NOSIGNAL) < 0)
    if (errno != EINTR) throw SystemError("hyrun's PMIx client helper: send", errno);
}

// The next message, or nullopt at the peer's end. Waits at most until `deadline`, checking
// `stop` every 20 ms; throws TimeoutError past the deadline.
std::optional<json> receive_message(int fd, Clock::time_point deadline, const std::function<bool()>& stop = {},
                                    bool* stopped = nullptr) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) throw TimeoutError("hyrun's PMIx client helper did not answer in time");
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, stop ? 20 : left)));
    if (n < 0 && errno != EINTR) throw SystemError("hyrun's PMIx client helper: poll", errno);
    if (n <= 0) {
      if (stop && stopped != nullptr && stop()) {
        *stopped = true;
        return std::nullopt;
      }
      continue;
    }
    const auto buffer = std::make_unique_for_overwrite<char[]>(kMaxMessage);
    const ssize_t got = ::recv(fd, buffer.get(), kMaxMessage, MSG_TRUNC);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw SystemError("hyrun's PMIx client helper: recv", errno);
    if (got == 0) return std::nullopt;
    if (static_cast<std::size_t>(got) > kMaxMessage) throw Error("hyrun's PMIx client helper: a message too long");
    return json::parse(std::string_view(buffer.get(), static_cast<std::size_t>(got)));
  }
}

std::vector<std::byte> bytes_of(const json& hex) { return from_hex(hex.get<std::string>(), "a PMIx value"); }

// --- the helper's side --------------------------------------------------------------------

json error_reply(const Error& e) {
  return {
      {"error", e.what()}, {"exit_code", e.exit_code()}, {"timeout", dynamic_cast<const TimeoutError*>(&e) != nullptr}};
}

// The identity travels as the helper read it: its fields in their order, node_id null when
// the server gave none (identity_of reads it back).
json info_of(const Client& client) {
  const ClientIdentity& id = client.identity();
  json hosts = json::array();
  for (int task = 0; task < id.job_size; ++task) hosts.push_back(client.hostname_of(task).value_or(""));
  const json node = id.node_id ? json(*id.node_id) : json(nullptr);
  return {
      {"identity", {id.rank, id.job_size, id.nspace, id.hostname, node, id.local_rank, id.local_size, id.description}},
      {"task_hosts", hosts}};
}

ClientIdentity identity_of(const json& info) {
  const json& f = info.at("identity");
  ClientIdentity id{f.at(0).get<int>(), f.at(1).get<int>(), f.at(2).get<std::string>(), f.at(3).get<std::string>(),
                    std::nullopt,       f.at(5).get<int>(), f.at(6).get<int>(),         f.at(7).get<std::string>()};
  if (!f.at(4).is_null()) id.node_id = f.at(4).get<std::uint32_t>();
  return id;
}

// Whether hyrun sent its next request: in the helper, a wait that it cancels ends.
bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

json handle(Client& client, const json& request, int fd) {
  const std::string op = request.at("op").get<std::string>();
  if (op == "put") {
    const auto value = bytes_of(request.at("value"));
    client.put(request.at("key").get<std::string>(), value);
    return json::object();
  }
  if (op == "commit") {
    client.commit();
    return json::object();
  }
  if (op == "fence") {
    // hyrun asks to stop waiting by sending its next request (a cancel).
    const bool done =
        client.fence(std::chrono::milliseconds(request.at("limit_ms").get<long long>()), [fd] { return readable(fd); });
    return {{"done", done}};
  }
  if (op == "get") {
    const auto value = client.get(request.at("rank").get<int>(), request.at("key").get<std::string>(),
                                  std::chrono::milliseconds(request.at("limit_ms").get<long long>()));
    return {{"value", to_hex(value)}};
  }
  if (op == "abort") client.abort(request.at("status").get<int>(), request.at("message").get<std::string>());
  throw Error(fmt::format("hyrun's PMIx client helper: unknown request '{}'", op));
}

// The key of piece `piece` of an allgather's value under `key`. Piece 0 starts with the
// number of pieces and a newline.
std::string piece_key(const std::string& key, std::size_t piece) { return fmt::format("{}.{}", key, piece); }

// The most pieces a value may have: kMaxMessage bounds a request, not a value; 256 MiB and
// more in pieces of 64 KiB is more than the relay takes from a node.
constexpr std::size_t kMaxPieces = 4098;

// The number of pieces piece 0 announces, and where its own bytes begin.
std::pair<std::size_t, std::size_t> pieces_announced(const std::vector<std::byte>& first, int rank) {
  const auto* text = reinterpret_cast<const char*>(first.data());
  const auto newline = std::string_view(text, std::min<std::size_t>(first.size(), 6)).find('\n');
  std::size_t pieces = 0;
  if (newline != std::string_view::npos) {
    const auto [end, error] = std::from_chars(text, text + newline, pieces);
    if (error == std::errc() && end == text + newline && pieces >= 1 && pieces <= kMaxPieces)
      return {pieces, newline + 1};
  }
  throw Error(
      fmt::format("hyrun's PMIx client helper: the allgather value of rank {} is not one that hyrun puts", rank));
}

// An allgather (ClientProcess::start_allgather): the values were put; commit, fence with no
// limit (hyrun's next request, or its end, cancels), then every rank's pieces in order.
void allgather(Client& client, const json& request, int fd) {
  const std::string key = request.at("key").get<std::string>();
  // A collected value is in the server by then, but a server busy with hundreds of nodes may
  // answer late (512 x 4 simulated nodes on 2 cores): each get may take --bootstrap-timeout.
  const std::chrono::milliseconds get_limit(request.at("get_limit_ms").get<long long>());
  client.commit();
  const bool done = client.fence(kNoLimit, [fd] { return readable(fd); });
  if (!done) return send_message(fd, {{"cancelled", true}});
  // Every rank's first piece asked for at once; a rank's further pieces, if any, before the
  // next rank's first is sent on.
  try {
    const std::vector<Client::Wanted> firsts{{.key = piece_key(key, 0), .first_rank = 0, .ranks = client.job_size()}};
    client.get_each(firsts, get_limit, [&](int rank, const std::vector<std::byte>& first) {
      const auto [pieces, start] = pieces_announced(first, rank);
      send_message(fd, {{"rank", rank}, {"value", to_hex(std::span(first).subspan(start))}});
      for (std::size_t piece = 1; piece < pieces; ++piece)
        send_message(fd, {{"rank", rank}, {"value", to_hex(client.get(rank, piece_key(key, piece), get_limit))}});
    });
  } catch (const TimeoutError& e) {
    throw TimeoutError(fmt::format("{}; hyrun waits for each value as long as --bootstrap-timeout", e.what()));
  }
  send_message(fd, {{"end", true}});
}

// The values a get_many request names (ClientProcess::get_many): one message each, sent on
// as it comes, then the end; or "cancelled" once hyrun sent its next request (a cancel); an
// error message ends it early.
void get_many(const Client& client, const json& request, int fd) {
  std::vector<Client::Wanted> wanted;
  for (const auto& w : request.at("wanted"))
    wanted.push_back({.key = w.at("key"), .first_rank = w.at("first_rank"), .ranks = w.at("ranks")});
  const bool done = client.get_each(
      wanted, std::chrono::milliseconds(request.at("limit_ms").get<long long>()),
      [fd](int rank, const std::vector<std::byte>& value) {
        send_message(fd, {{"rank", rank}, {"value", to_hex(value)}});
      },
      [fd] { return readable(fd); });
  send_message(fd, done ? json{{"end", true}} : json{{"cancelled", true}});
}

// Connects, says who it is, then answers until hyrun closes its end.
void serve(int fd) {
  std::optional<Client> client;
  try {
    client = Client::connect();
    if (!client) return send_message(fd, {{"none", true}});
    send_message(fd, info_of(*client));
  } catch (const Error& e) {
    return send_message(fd, error_reply(e));
  }
  for (;;) {
    std::optional<json> request;
    try {
      request = receive_message(fd, Clock::time_point::max());
    } catch (const std::exception&) {
      return;
    }
    if (!request) return;                                // hyrun ends: PMIx_Finalize as the Client goes
    if (request->value("op", "") == "cancel") continue;  // the fence it cancelled has answered
    try {
      if (request->value("op", "") == "allgather")
        allgather(*client, *request, fd);
      else if (request->value("op", "") == "get_many")
        get_many(*client, *request, fd);
      else
        send_message(fd, handle(*client, *request, fd));
    } catch (const Error& e) {
      send_message(fd, error_reply(e));
    } catch (const std::exception& e) {
      send_message(fd, error_reply(Error(fmt::format("hyrun's PMIx client helper: {}", e.what()))));
    }
  }
}

[[noreturn]] void run_helper(int fd, pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) std::_Exit(0);
  ::prctl(PR_SET_NAME, "hyrun-pmix-cli");  // ps and tests tell it from hyrun by this name
  // The job's signals are hyrun's to judge; it ends this helper itself.
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE}) ::signal(sig, SIG_IGN);
  ::signal(SIGCHLD, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC); null >= 0) ::dup2(null, STDIN_FILENO);
  try {
    serve(fd);
  } catch (...) {
  }
  spdlog::default_logger()->flush();
  std::_Exit(0);
}

void clear_pmix_environment() {
  std::vector<std::string> names;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e)
    if (std::strncmp(*e, "PMIX_", 5) == 0) names.emplace_back(*e, std::strcspn(*e, "="));
  for (const auto& name : names) ::unsetenv(name.c_str());
}

}  // namespace

std::optional<ClientProcess> ClientProcess::connect(std::chrono::milliseconds init_limit,
                                                    const std::function<bool()>& stop) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
    throw SystemError("hyrun's PMIx client helper: socketpair", errno);
  UniqueFd ours(pair[0]), theirs(pair[1]);
  const pid_t parent = ::getpid();
  spdlog::default_logger()->flush();
  const pid_t pid = ::fork();
  if (pid < 0) throw SystemError("hyrun's PMIx client helper: fork", errno);
  if (pid == 0) {
    ours.reset();
    run_helper(theirs.get(), parent);
  }
  theirs.reset();
  ClientProcess process;
  process.socket_ = std::move(ours);
  process.pid_ = pid;
  process.op_limit_ = init_limit;
  bool stopped = false;
  std::optional<json> info;
  try {
    info = receive_message(process.socket_.get(), Clock::now() + init_limit, stop, &stopped);
  } catch (const TimeoutError&) {
    throw TimeoutError(fmt::format("hyrun's PMIx client helper: PMIx_Init did not complete within {:g} s",
                                   std::chrono::duration<double>(init_limit).count()));
  }
  if (stopped) throw Stopped("hyrun was asked to end while its PMIx client helper connected (PMIx_Init)");
  if (!info) throw Error(fmt::format("hyrun's PMIx client helper (pid {}) ended before it connected", pid));
  if (info->contains("error"))
    throw Error(info->at("error").get<std::string>(), info->value("exit_code", exit_code::kLauncherError));
  if (info->value("none", false)) return std::nullopt;  // the destructor ends the helper
  process.identity_ = identity_of(*info);
  process.task_hosts_ = info->at("task_hosts").get<std::vector<std::string>>();
  clear_pmix_environment();
  return process;
}

ClientProcess::~ClientProcess() { finish(kEndLimit, {}); }

ClientProcess& ClientProcess::operator=(ClientProcess&& other) noexcept {
  if (this != &other) {
    finish(kEndLimit, {});
    ClientApi::operator=(std::move(other));
    socket_ = std::move(other.socket_);
    pid_ = other.pid_;
    op_limit_ = other.op_limit_;
    task_hosts_ = std::move(other.task_hosts_);
  }
  return *this;
}

// The helper finalizes when its socket closes; its end is awaited (bounded), so that the
// server above never sees a client vanish without PMIx_Finalize while hyrun is ending well.
// hyrun's own reaper may have reaped it already (it is a child like the ranks).
void ClientProcess::finish(std::chrono::milliseconds limit, const std::function<bool()>& stop) noexcept {
  if (!socket_) return;
  ::shutdown(socket_.get(), SHUT_WR);
  const auto start = Clock::now();
  auto deadline = start + std::max<Clock::duration>(limit, kEndLimit);
  bool asked_to_stop = false;
  const std::function<bool()> none;
  try {
    for (;;) {
      bool stopped = false;
      const auto message = receive_message(socket_.get(), deadline, asked_to_stop ? none : stop, &stopped);
      if (stopped) {
        asked_to_stop = true;
        deadline = std::min(deadline, Clock::now() + kEndLimit);
      } else if (!message) {
        break;  // the helper ended
      }
    }
  } catch (const std::exception& e) {
    spdlog::warn("hyrun's PMIx client helper (pid {}) did not end within {:.0f} s; killing it", pid_,
                 std::chrono::duration<double>(Clock::now() - start).count());
    ::kill(pid_, SIGKILL);
  }
  socket_.reset();
  int status = 0;
  ::waitpid(pid_, &status, WNOHANG);
}

namespace {

// An error the helper met (error_reply), thrown here as it was there.
void rethrow_error(const json& reply) {
  if (!reply.contains("error")) return;
  const std::string what = reply.at("error").get<std::string>();
  if (reply.value("timeout", false)) throw TimeoutError(what);
  throw Error(what, reply.value("exit_code", exit_code::kLauncherError));
}

// One request, its reply.
json call(int fd, pid_t pid, const json& request, std::chrono::milliseconds limit) {
  send_message(fd, request);
  const auto reply = receive_message(fd, Clock::now() + limit + kReplySlack);
  if (!reply) throw Error(fmt::format("hyrun's PMIx client helper (pid {}) ended", pid));
  rethrow_error(*reply);
  return *reply;
}

}  // namespace

void ClientProcess::put(const std::string& key, std::span<const std::byte> value) {
  call(socket_.get(), pid_, {{"op", "put"}, {"key", key}, {"value", to_hex(value)}}, std::chrono::seconds(0));
}

void ClientProcess::commit() { call(socket_.get(), pid_, {{"op", "commit"}}, std::chrono::seconds(0)); }

bool ClientProcess::fence(std::chrono::milliseconds timeout, const std::function<bool()>& stop) {
  send_message(socket_.get(), {{"op", "fence"}, {"limit_ms", timeout.count()}});
  bool stopped = false;
  auto reply = receive_message(socket_.get(), Clock::now() + timeout + kReplySlack, stop, &stopped);
  if (stopped) {  // the helper leaves the fence when it sees the cancel
    send_message(socket_.get(), {{"op", "cancel"}});
    reply = receive_message(socket_.get(), Clock::now() + kReplySlack);
    if (reply && !reply->contains("error")) return false;
  }
  if (!reply) throw Error(fmt::format("hyrun's PMIx client helper (pid {}) ended during the fence", pid_));
  rethrow_error(*reply);
  return reply->value("done", false) && !stopped;
}

std::vector<std::byte> ClientProcess::get(int rank, const std::string& key, std::chrono::milliseconds timeout) {
  const auto reply =
      call(socket_.get(), pid_, {{"op", "get"}, {"rank", rank}, {"key", key}, {"limit_ms", timeout.count()}}, timeout);
  return bytes_of(reply.at("value"));
}

std::optional<std::vector<std::vector<std::byte>>> ClientProcess::get_many(const std::vector<Wanted>& wanted,
                                                                           std::chrono::milliseconds timeout,
                                                                           const std::function<bool()>& stop) {
  json request{{"op", "get_many"}, {"limit_ms", timeout.count()}, {"wanted", json::array()}};
  std::size_t expected = 0;
  for (const Wanted& w : wanted) {
    request["wanted"].push_back({{"key", w.key}, {"first_rank", w.first_rank}, {"ranks", w.ranks}});
    expected += static_cast<std::size_t>(std::max(w.ranks, 0));
  }
  send_message(socket_.get(), request);
  std::vector<std::vector<std::byte>> values;
  bool stopped = false;
  for (;;) {  // the helper sends each value as it comes, each within `timeout` of the one before
    bool stop_now = false;
    const auto reply = receive_message(socket_.get(), Clock::now() + timeout + kReplySlack,
                                       stopped ? std::function<bool()>() : stop, &stop_now);
    if (stop_now) {  // the helper ends the gets when it sees the cancel, and says so
      send_message(socket_.get(), {{"op", "cancel"}});
      stopped = true;
      continue;
    }
    if (!reply) throw Error(fmt::format("hyrun's PMIx client helper (pid {}) ended", pid_));
    if (stopped && reply->contains("error")) break;  // hyrun is stopping anyway: the signal is what it says
    rethrow_error(*reply);
    if (reply->contains("end") || reply->contains("cancelled")) break;
    if (values.size() >= expected)
      throw Error(fmt::format("hyrun's PMIx client helper (pid {}) sent too many values", pid_));
    values.push_back(bytes_of(reply->at("value")));
  }
  if (stopped) return std::nullopt;
  if (values.size() != expected)
    throw Error(fmt::format("hyrun's PMIx client helper (pid {}) sent {} of {} values", pid_, values.size(), expected));
  return values;
}

void ClientProcess::start_allgather(const std::string& key, std::span<const std::byte> value) {
  const std::size_t pieces = std::max<std::size_t>(1, (value.size() + kAllgatherPiece - 1) / kAllgatherPiece);
  if (pieces > kMaxPieces)
    throw Error(
        fmt::format("an allgather value of {} bytes is more than hyrun's PMIx client helper takes", value.size()));
  for (std::size_t piece = 0; piece < pieces; ++piece) {
    const std::size_t from = piece * kAllgatherPiece;
    std::string hex;
    if (piece == 0) {
      const std::string header = fmt::format("{}\n", pieces);
      hex = to_hex(std::as_bytes(std::span(header)));
    }
    hex += to_hex(value.subspan(from, std::min(kAllgatherPiece, value.size() - from)));
    call(socket_.get(), pid_, {{"op", "put"}, {"key", piece_key(key, piece)}, {"value", std::move(hex)}},
         std::chrono::seconds(0));
  }
  send_message(socket_.get(), {{"op", "allgather"}, {"key", key}, {"get_limit_ms", op_limit_.count()}});
}

std::optional<ClientProcess::AllgatherPiece> ClientProcess::read_allgather() {
  const auto reply = receive_message(socket_.get(), Clock::now() + kReplySlack);
  if (!reply) throw Error(fmt::format("hyrun's PMIx client helper (pid {}) ended during an allgather", pid_));
  rethrow_error(*reply);
  if (reply->contains("cancelled")) throw Error("the allgather through hyrun's PMIx client helper was cancelled");
  if (reply->contains("end")) return std::nullopt;
  return AllgatherPiece{reply->at("rank").get<int>(), bytes_of(reply->at("value"))};
}

void ClientProcess::abort(int status, const std::string& message) {
  const int code = exit_code::of_failure_status(status);
  spdlog::default_logger()->flush();
  try {
    send_message(socket_.get(), {{"op", "abort"}, {"status", code}, {"message", message}});
    // The helper exits once the server has the abort; the server then ends this process too.
    while (receive_message(socket_.get(), Clock::now() + kReplySlack)) {
    }
  } catch (const std::exception& e) {
    spdlog::error("pmix: the abort through hyrun's PMIx client helper (pid {}): {}", pid_, e.what());
  }
  spdlog::default_logger()->flush();
  std::_Exit(code);
}

}  // namespace hyrun::pmix
