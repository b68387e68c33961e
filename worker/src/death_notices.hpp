#pragma once
// What hyrun tells this rank of other ranks' deaths, over the rank's control channel
// (HYRUN_CONTROL_FD; messages in hyrun/common/death_notice.hpp). Constructing one asks hyrun
// for the notices ("handles-deaths v1"); a thread then reads them as they come, so that a
// death is known at once, whatever the program is doing, at the cost of an atomic load per
// question. hyrun sees its own ranks die (and, through the node link, the ranks of a lost
// node), so endpoints to ranks of this node need no UCX peer error handling, which would
// cost them shared memory (UCX 1.13). Ranks of this host that another hyrun started (a
// staged launch) are watched by the same thread through their pidfds (watch()).
#include <ucp/api/ucp.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "hyrun/common/process_identity.hpp"
#include "hyrun/common/unique_fd.hpp"

namespace hyrun {

class DeathNotices {
 public:
  /// Sends the request on `control_fd` (which this object reads from now on: no one else
  /// may) for a world of `world_size` ranks. Throws SystemError when it cannot be sent.
  DeathNotices(int control_fd, int world_size, int own_rank);
  ~DeathNotices();
  DeathNotices(const DeathNotices&) = delete;
  DeathNotices& operator=(const DeathNotices&) = delete;

  /// True once hyrun said that the current process of `rank` has ended.
  bool dead(int rank) const { return dead_[static_cast<std::size_t>(rank)].load(std::memory_order_acquire); }
  /// `rank` has a new process: forgets its death and stops watching its old process. Every
  /// notice hyrun sent before is read first (hyrun sends it before it starts the new
  /// process), so none can land after.
  void forget(int rank);
  /// Watches `rank`'s process `process` when it runs on this host (ProcessIdentity::
  /// same_host): its end marks the rank dead, as a notice from hyrun does. A process that
  /// has ended already is marked dead at once. Replaces an earlier watch of the rank.
  void watch(int rank, const ProcessIdentity& process);
  /// Signals `worker` (ucp_worker_signal) at every notice from now on: a rank blocked on
  /// the worker's events (ucx::Progress::wait_for_event) then checks dead() at once. The
  /// worker must outlive this object.
  void wake_on_notice(ucp_worker_h worker);

 private:
  void run();
  /// Reads every notice queued now, without waiting (call with mutex_ held). False once
  /// hyrun closed the channel.
  bool read_queued();
  /// Marks `rank` dead and wakes the worker (call with mutex_ held).
  void mark_dead(int rank);
  /// Reads the pidfd watches that fired (call with mutex_ held).
  struct Polled {
    int rank;
    uint64_t generation;
  };
  void on_watches(const std::vector<Polled>& polled, const std::vector<short>& revents);

  struct Watch {
    UniqueFd pidfd;
    uint64_t generation = 0;  // tells a replaced watch from the one polled
  };

  int fd_;
  int world_size_;
  int own_rank_;
  int stop_fd_ = -1;            // eventfd: wakes the reader to end
  UniqueFd changed_fd_;         // eventfd: wakes the reader to poll another set of watches
  std::vector<Watch> watches_;  // by rank; guarded by mutex_
  uint64_t generation_ = 0;
  bool watch_failed_ = false;  // said once: later failures are alike
  std::unique_ptr<std::atomic<bool>[]> dead_;
  std::mutex mutex_;  // one reader at a time: the thread, or forget(); guards worker_
  ucp_worker_h worker_ = nullptr;
  std::thread reader_;
};

}  // namespace hyrun
