#pragma once
// Rank 0's join server (ep-elastic): listens on a TCP port, which is also the job's
// readiness probe, and gives later launches their ranks from the RankPool. A launch proves
// that it belongs to the job (join_protocol.hpp); anything else is refused and logged.
//
// Anyone who reaches the port can connect, so one thread serves every connection at once
// (poll), each bounded by a deadline counted from its accept, and the connections waiting
// for a request are capped per peer address and in all: a new connection always gets in,
// and sheds the oldest waiting one of the peer that holds the most. A flood of idle or slow
// connections therefore cannot keep a real launch, which asks within a round trip, out.
//
// A launch that was given ranks keeps its connection open while it runs; when it ends (or
// its host stops answering TCP keepalives) before its ranks joined, they go back to the pool
// for another launch. Such connections proved the token, and there is at most one per rank.
#include <atomic>
#include <chrono>
#include <list>
#include <map>
#include <string>
#include <thread>

#include "hyrun/common/unique_fd.hpp"
#include "hyrun/common/warning_limiter.hpp"
#include "join_protocol.hpp"
#include "rank_pool.hpp"

namespace hyrun::ep::elastic {

class JoinServer {
 public:
  /// How long a connection has, from its accept, to send its request.
  static constexpr std::chrono::seconds kRequestDeadline{3};
  /// Connections waiting for their request, from one peer address and in all.
  static constexpr std::size_t kMaxWaitingPerPeer = 32;
  static constexpr std::size_t kMaxWaiting = 256;

  /// Listens on `port` (all interfaces; 0 = any free port, see port()). Throws Error naming
  /// the port when it cannot. `grant` holds what every grant carries (world size, root
  /// address); `root_host` is node 0.
  JoinServer(int port, std::string token, join::Grant grant, std::string root_host, RankPool& pool);
  ~JoinServer();
  JoinServer(const JoinServer&) = delete;
  JoinServer& operator=(const JoinServer&) = delete;

  int port() const { return port_; }

 private:
  /// A connection greeted and waiting for its request line.
  struct Waiting {
    UniqueFd fd;
    std::string peer;
    std::string nonce;
    std::string line;
    join::Clock::time_point deadline;
  };
  using WaitingList = std::list<Waiting>;  // oldest first
  /// A launch given ranks, while it runs.
  struct Granted {
    UniqueFd fd;
    std::string peer;
    std::string host;
    std::vector<int> ranks;
  };

  void serve();
  void accept_new();
  void admit(UniqueFd fd, const std::string& peer);
  WaitingList::iterator drop(WaitingList::iterator it);
  void shed_oldest_of(const std::string& peer, const std::string& why);
  /// Sheds the oldest waiting connection of the peer that holds the most; false if none.
  bool shed(const std::string& why);
  /// Reads what `w` sent; true when it is done with (answered, closed, or failed).
  bool read_from(Waiting& w);
  void answer(Waiting& w);
  /// `g`'s connection has news: the launch ended (or broke the protocol). Its ranks that
  /// never joined go back to the pool.
  void launch_ended(const Granted& g);

  UniqueFd listen_;
  int port_ = 0;
  std::string token_;
  join::Grant grant_;
  RankPool& pool_;
  // The serve() thread's own state.
  WaitingList waiting_;
  std::list<Granted> granted_;
  std::map<std::string, std::size_t> per_peer_;  // peer address -> connections in waiting_
  std::map<std::string, int> nodes_;             // host -> node index
  join::Clock::time_point accept_again_{};       // out of descriptors: accept rests until then
  // Anyone can connect: the warnings they provoke are bounded.
  WarningLimiter refusals_{"refused or failed connections to the join server"};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace hyrun::ep::elastic
