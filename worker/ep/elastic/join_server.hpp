#pragma once
// Rank 0's join server (ep-elastic): listens on a TCP port, which is also the job's
// readiness probe, and gives later launches their ranks as the reference's rank server
// does: the lowest released rank, else the next one never given. A launch proves that it
// belongs to the job (join_protocol.hpp); anything else is refused and logged. One thread
// serves one connection at a time, each bounded by a short deadline.
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "hyrun/common/warning_limiter.hpp"
#include "join_protocol.hpp"

namespace hyrun::ep::elastic {

/// Ranks given to a launch, and their local ranks on its host (binding slots: local rank
/// i gets GPU i by default, so two launches on one node must not reuse a slot in use).
struct Placement {
  std::vector<int> ranks;
  std::vector<int> local_ranks;
};

/// The ranks a join may be given, and the local-rank slots in use on each host, as the
/// reference's rank server keeps them. Thread-safe.
class RankPool {
 public:
  /// Ranks [first_free, world_size) are free; the lower ones belong to the first launch,
  /// on `root_host`, at local ranks equal to their ranks.
  RankPool(int first_free, int world_size, const std::string& root_host = "");
  /// `count` ranks (lowest released first, then the next ones), each at the lowest free
  /// local rank of `host`; or throws Error saying why none are left, taking nothing then.
  Placement take(int count, const std::string& host = "");
  /// `rank` left or was killed: a later join may get it, and its slot is free again.
  void release(int rank);

 private:
  std::mutex mutex_;
  std::set<int> released_;
  int next_;
  int world_size_;
  std::map<int, std::pair<std::string, int>> where_;  // rank -> (host, local rank)
  std::map<std::string, std::set<int>> busy_;         // host -> local ranks in use
};

class JoinServer {
 public:
  /// Listens on `port` (all interfaces; 0 = any free port, see port()). Throws Error naming
  /// the port when it cannot. `grant` holds what every grant carries (world size, root
  /// address); `root_host` is node 0.
  JoinServer(int port, std::string token, join::Grant grant, std::string root_host, RankPool& pool);
  ~JoinServer();
  JoinServer(const JoinServer&) = delete;
  JoinServer& operator=(const JoinServer&) = delete;

  int port() const { return port_; }

 private:
  void serve();
  void handle(int fd, const std::string& peer);

  int listen_fd_ = -1;
  int port_ = 0;
  std::string token_;
  join::Grant grant_;
  RankPool& pool_;
  std::map<std::string, int> nodes_;  // host -> node index (serve() thread only)
  // Anyone can connect: the warnings they provoke are bounded (serve() thread only).
  WarningLimiter refusals_{"refused or failed connections to the join server"};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace hyrun::ep::elastic
