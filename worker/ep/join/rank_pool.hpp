#pragma once
// The ranks that later launches of an elastic job may be given, as the reference's rank
// server keeps them: the lowest released rank, else the next one never given; and the
// local-rank (binding) slots in use on each host.
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

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
  /// They are pending until joined().
  Placement take(int count, const std::string& host = "");
  /// `rank` left or was killed: a later join may get it, and its slot is free again.
  void release(int rank);
  /// A process of `rank` joined the job: the end of the launch that took it no longer
  /// gives it back (the job's own failure handling owns it from here).
  void joined(int rank);
  /// The launch that took `ranks` ended: those still pending are released. Returns them.
  std::vector<int> give_back_pending(const std::vector<int>& ranks);

 private:
  void release_locked(int rank);

  std::mutex mutex_;
  std::set<int> released_;
  std::set<int> pending_;  // taken, not yet joined
  int next_;
  int world_size_;
  std::map<int, std::pair<std::string, int>> where_;  // rank -> (host, local rank)
  std::map<std::string, std::set<int>> busy_;         // host -> local ranks in use
};

}  // namespace hyrun::ep::elastic
