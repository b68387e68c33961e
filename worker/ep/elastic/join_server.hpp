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

#include "join_protocol.hpp"

namespace hyrun::ep::elastic {

/// The ranks a join may be given. Thread-safe.
class RankPool {
 public:
  /// Ranks [first_free, world_size) are free; the lower ones belong to the first launch.
  RankPool(int first_free, int world_size) : next_(first_free), world_size_(world_size) {}
  /// `count` ranks (lowest released first, then the next ones), or throws Error saying
  /// why none are left; takes nothing then.
  std::vector<int> take(int count);
  /// `rank` left or was killed: a later join may get it.
  void release(int rank);

 private:
  std::mutex mutex_;
  std::set<int> released_;
  int next_;
  int world_size_;
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
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace hyrun::ep::elastic
