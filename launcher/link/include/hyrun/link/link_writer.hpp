#pragma once
// The sending side of the node link (node_link.hpp): every line to a peer hyrun, and the
// heartbeats, which a thread of its own sends. So no work of hyrun's main loop (starting
// many ranks, a flood of output, a slow PMIx call) keeps this node's heartbeats from
// leaving, and a busy node is not taken for a lost one. Lines stay whole on the wire: the
// thread and the main loop append to one queue per peer under one lock, and what a send
// leaves is sent first the next time. A body sent to several peers (the root's broadcast of
// a fence) is held once, shared by their queues: only each peer's seal is its own.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "hyrun/link/link_seal.hpp"

namespace hyrun {

class LinkWriter {
 public:
  /// The most bytes of messages queued for one peer: a peer that took none of several of the
  /// largest fences (pmix_relay.hpp: 256 MiB, twice that as hex).
  static constexpr std::size_t kMaxQueuedBytes = std::size_t{4} << 30;

  /// Starts the thread, which sends "alive" to every peer that beats each `heartbeat`, and
  /// what is queued for a peer as its non-blocking connect completes (it looks every 20 ms
  /// while one is in progress): a node's hello waits for no loop. `max_queued` bounds each
  /// peer's queue (send()).
  explicit LinkWriter(std::chrono::milliseconds heartbeat, std::size_t max_queued = kMaxQueuedBytes);
  /// Stops the thread; the sockets stay their owners'.
  ~LinkWriter();
  LinkWriter(const LinkWriter&) = delete;
  LinkWriter& operator=(const LinkWriter&) = delete;

  /// Registers the socket of peer `task` (owned by the caller, who calls remove() before
  /// closing it); `seal` seals every line sent to it (link_seal.hpp). A `connecting` socket
  /// is written once connected() or once the thread finds its non-blocking connect complete.
  /// `beats`: whether the thread sends it heartbeats (a peer that watches this hyrun).
  /// `hello`, when not empty: the one line that goes unsealed, a dialling node's hello, queued
  /// as the connection's first line under the same lock, so that no heartbeat goes before it
  /// (the peer refuses a connection whose first line is anything else).
  void add(int task, int fd, bool connecting, LinkSeal seal, bool beats = true, std::string_view hello = {});
  /// The non-blocking connect of `task` completed: what was queued goes now.
  void connected(int task);
  /// Forgets `task`: nothing is written to its socket any more. Call before closing it.
  void remove(int task);
  /// Queues `body` sealed and a newline for `task` and sends what the socket takes now. A
  /// peer that has taken nothing for 4 KiB gets no more heartbeats (its silence is judged by
  /// what we hear). Returns false, queueing nothing, when the peer's queue already holds more
  /// than the bound: a peer that reads nothing (the caller ends its link).
  bool send(int task, std::string_view body);
  /// The same with a body that other peers' queues may hold too.
  bool send(int task, std::shared_ptr<const std::string> body);
  /// Sends what is queued for `task` (its socket became writable).
  void flush(int task);
  /// Whether `task` waits for its socket to be writable (connecting, or bytes queued).
  bool wants_out(int task) const;
  /// Every task that wants_out() now, in order: one look for the main loop's poll, however
  /// many peers there are.
  std::vector<int> wanting_out() const;
  /// No more heartbeats to `task` (it said bye, or we did).
  void stop_heartbeats(int task);
  /// Heartbeats to `task` from now (it watches this hyrun now: link_tree.hpp).
  void start_heartbeats(int task);
  std::size_t max_queued() const { return max_queued_; }
  /// Bytes written to every peer's socket so far (--timings).
  std::uint64_t bytes_sent() const;

 private:
  // Bytes to send: a peer's own (a seal, a newline, a short line) or a shared body.
  struct Piece {
    std::string own;
    std::shared_ptr<const std::string> shared;
    std::string_view bytes() const { return shared ? std::string_view(*shared) : std::string_view(own); }
  };
  struct Out {
    int fd = -1;
    bool connecting = false;
    bool beats = true;
    std::deque<Piece> pending;
    std::size_t sent = 0;           // of the first piece
    std::size_t pending_bytes = 0;  // of every piece, less `sent`
    std::uint64_t written = 0;      // to the socket, in all
    std::optional<LinkSeal> seal;
  };
  static void queue_locked(Out& out, Piece piece);
  void run(std::chrono::milliseconds heartbeat);
  static void flush_locked(Out& out);
  static void check_connected_locked(Out& out);
  // Keeps wanting_ true to `task`'s queue and connect after a change to them.
  void settle_locked(int task, const Out& out);

  const std::size_t max_queued_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool connect_added_ = false;  // the thread's wait is shortened for a connect in progress
  std::map<int, Out> peers_;
  std::set<int> wanting_;                 // the peers that wants_out()
  std::uint64_t written_by_removed_ = 0;  // bytes_sent() of peers removed
  std::thread thread_;
};

}  // namespace hyrun
