#pragma once
// The join protocol between a later launch of an elastic job (`ep-elastic --tcp-server ADDR`)
// and rank 0's join server: one TCP connection, three lines.
//
//   server: "hyrun-ep-join v2 <nonce>"                         (32 hex digits, fresh per connection)
//   client: "join <count> <host> <proof>"                      proof = HMAC-SHA256(job token, nonce count host)
//   server: "ok
//   {"ranks":[5,6],"local_ranks":[1,2],"world_size":8,"launch_ranks":4,"node_rank":1,"root_address":"<hex>"}"  or
//   "refused <why>"
//
// The token never crosses the network; a proof is good for one nonce only. Every line is
// bounded (kMaxLine) and every read has a deadline. A connection that sends nothing (a
// readiness probe) is closed without a word and assigns nothing.
//
// After "ok" the launch keeps the connection open, silent, for as long as it runs (v2): the
// server gives back the ranks of a launch whose connection ends before they joined the job
// (the launch failed or was stopped first), so that another launch can bring them.
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hyrun/common/unique_fd.hpp"

namespace hyrun::ep::elastic::join {

using Clock = std::chrono::steady_clock;

/// The longest line either side accepts (a UCX worker address in hex fits easily).
inline constexpr std::size_t kMaxLine = 8192;
/// The most ranks one launch may ask for.
inline constexpr int kMaxRanksPerJoin = 4096;

struct Request {
  int count = 0;
  std::string host;
  std::string proof;
};

struct Grant {
  std::vector<int> ranks;        ///< the ranks this launch runs
  std::vector<int> local_ranks;  ///< their local ranks (binding slots) on the joining host
  int world_size = 0;
  int launch_ranks = 0;      ///< ranks 0..launch_ranks-1 belong to the first launch (ep-bench --launch-ranks)
  int node_rank = 0;         ///< index of the joining host (the root's is 0)
  std::string root_address;  ///< rank 0's UCX worker address, hex
};

std::string new_nonce();
std::string greeting(const std::string& nonce);
/// The nonce of a greeting line (without newline), or std::nullopt. Throws Error for the
/// greeting of another version of the protocol (another build of ep-elastic).
std::optional<std::string> parse_greeting(std::string_view line);
std::string proof(const std::string& token, const std::string& nonce, int count, const std::string& host);
std::string format_request(const Request& request);
std::optional<Request> parse_request(std::string_view line);
/// True when `request` proves knowledge of `token` for `nonce` (constant-time comparison).
bool proves(const Request& request, const std::string& token, const std::string& nonce);
std::string format_grant(const Grant& grant);
std::string format_refusal(const std::string& why);
/// The grant of a reply line; throws Error with the server's reason for a refusal, or
/// naming what is malformed.
Grant parse_reply(std::string_view line, const std::string& server);

/// Called at least every 100 ms while a client waits; it throws to end the wait (a stop
/// signal: the caller knows which and what to say).
using StopCheck = std::function<void()>;

/// Reads one line (without its newline) of at most kMaxLine bytes before `deadline`.
/// std::nullopt when the peer closed first; throws TimeoutError past the deadline and
/// Error for an overlong line.
std::optional<std::string> read_line(int fd, Clock::time_point deadline, const std::string& what,
                                     const StopCheck& check_stop = {});
/// Writes all of `text` (MSG_NOSIGNAL); throws SystemError.
void write_all(int fd, std::string_view text, const std::string& what);

/// A launch's ranks and the connection that holds them: keep it open while the launch
/// runs; closing it before the ranks joined the job gives them back to the job.
struct Membership {
  Grant grant;
  UniqueFd connection;
};

/// The client's side: connects to `server`:`port`, proves the token and asks for `count`
/// ranks. A refused connection, or one the server closed before it answered (it may still
/// be starting, or have shed the connection under a flood), is tried again until the
/// deadline; nothing blocks past it, whatever the network does. Throws Error (refused, with
/// the server's reason), TimeoutError, or what `check_stop` throws.
Membership request_ranks(const std::string& server, int port, const std::string& token, int count,
                         const std::string& host, std::chrono::milliseconds timeout, const StopCheck& check_stop = {});

}  // namespace hyrun::ep::elastic::join
