#pragma once
// One-sided transport of the EP core. Every rank owns one receive region of
// region_bytes(shape) bytes (see layout.hpp), registered so that every peer can write
// into it. Data moves only as puts into a peer's region; completion is signalled per
// source rank by an 8-byte epoch word written after the data:
//
//   put(peer, off, src, len) ...   // data, any number, any peers
//   flush()                        // every put so far is complete at its target
//   signal(peer, sig_off, epoch)   // 8-byte write of the epoch into the peer's region
//   flush()                        // signals delivered
//
// and the receiver waits with wait_signals(): the word of each expected source reaches
// the epoch, or the deadline passes and the silent ranks are returned (never a wait
// without limit). There are no per-token two-sided messages.
//
// Peers of an elastic job come and go: a rank's local_descriptor() is what a peer needs to
// write into its region; attach_peer() makes a peer's region (by its descriptor) the target
// of later writes, replacing an older one (a restarted peer), and detach_peer() forgets it.
// How a transport first learns its peers is PeerAttach.
//
// Failed peers (elastic jobs): a transport may know that a peer's process died
// (peer_known_failed). Puts and signals to such a peer are not issued; the next flush()
// reports it in PeerFailureError without waiting for the timeout, and wait_signals()
// returns as soon as a rank still missing is known failed (the call has failed; a live
// rank still missing may have left it for the failure agreement and will not signal).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hyrun/common/error.hpp"
#include "hyrun/ep/ep_call.hpp"

namespace hyrun::ep {

using Clock = std::chrono::steady_clock;

/// How a transport learns its peers' regions.
enum class PeerAttach {
  kCollective,  ///< construction exchanges descriptors with every rank (allgatherv)
  kDeferred,    ///< no exchange: the caller calls attach_peer for each peer (restarted ranks)
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  /// Ranks addressable through this transport (0 .. num_ranks()-1).
  virtual int num_ranks() const = 0;
  /// This rank's registered receive region.
  virtual std::span<std::byte> region() = 0;
  /// Starts a write of `len` bytes from `src` to offset `remote_offset` of `peer`'s
  /// region (peer == rank() allowed). `src` must stay valid and unchanged until the
  /// next flush() returns. A write to a peer known to be dead (or not attached, see
  /// UcxTransport) is not issued and is reported by the next flush() as a
  /// PeerFailureError: the put itself does not throw, so that a send loop still reaches
  /// every other peer.
  virtual void put(int peer, std::size_t remote_offset, const void* src, std::size_t len) = 0;
  /// Direct store access to `len` bytes at `remote_offset` of `peer`'s region, when this
  /// process maps that region (its own; a peer's in shared memory): the caller writes the
  /// bytes itself instead of staging them for put(). Such stores count as puts issued now:
  /// the next flush() orders them before later signals. nullptr when the region is not
  /// mapped here, or the peer is known failed or not attached: then use put(), which
  /// reports such peers. Valid until the next flush(); the default maps nothing.
  virtual std::byte* mapped(int peer, std::size_t remote_offset, std::size_t len) {
    (void)peer, (void)remote_offset, (void)len;
    return nullptr;
  }
  /// Writes the 8-byte `value` at `remote_offset` (8-aligned) of `peer`'s region, after
  /// every put that a preceding flush() completed. Delivered by the next flush().
  virtual void signal(int peer, std::size_t remote_offset, uint64_t value) = 0;
  /// Completes every put and signal issued so far at its target. Throws
  /// PeerFailureError naming the peers whose operations failed or that are known dead
  /// (operations to them are abandoned at once, not waited for), PeerTimeoutError when
  /// it cannot complete within the transport's timeout. Either way every operation is
  /// finished with: the next put starts a new batch.
  virtual void flush() = 0;
  /// Waits until, for every rank r in `peers`, the uint64 at
  /// `first_signal_offset + 8*r` of this rank's region is >= `value`, until a rank still
  /// missing is known failed (known_failed), or until `deadline`. Drives the
  /// transport's progress while waiting. Returns the ranks whose signal did not arrive
  /// (empty on success).
  std::vector<int> wait_signals(std::span<const int> peers, std::size_t first_signal_offset, uint64_t value,
                                Clock::time_point deadline);
  /// This rank's region as a peer attaches it (transport-specific bytes), valid for the
  /// transport's lifetime.
  virtual std::vector<std::byte> local_descriptor() const = 0;
  /// Makes `peer`'s region, as its local_descriptor() describes it, the target of later
  /// writes, replacing an older one; operations still outstanding to the peer are completed
  /// or abandoned first. peer == rank() is a no-op. Throws UsageError for a bad peer or
  /// descriptor (the previous attachment then stays as it was).
  virtual void attach_peer(int peer, std::span<const std::byte> descriptor) = 0;
  /// Forgets `peer`: later writes to it are not issued, and flush() reports them as
  /// PeerFailureError. Call it when the peer failed, before its process is replaced.
  /// Throws UsageError for a peer that is not another rank.
  virtual void detach_peer(int peer) = 0;
  /// True when this transport knows that `peer`'s process died (e.g. UCX reported its
  /// endpoint failed). Never true for rank() itself. A cleared mark (the peer was
  /// replaced) makes it false again.
  bool known_failed(int peer) { return peer != rank() && peer_known_failed(peer); }

 protected:
  /// The failure knowledge behind known_failed(); default: none (waits end at the deadline).
  virtual bool peer_known_failed(int peer) {
    (void)peer;
    return false;
  }
  /// Called between polls of the signal words: lets remote writes land (software RMA
  /// needs the target's progress) and gives the CPU away when nothing happens.
  virtual void progress_while_waiting() = 0;
};

/// Every rank's region in one process: a unit-test device for running the algorithm
/// with several simulated ranks (from one thread, with the split send/recv calls, or
/// from one thread per rank). Not a model of a real network.
class InProcessFabric {
 public:
  /// kMapped: every region is mapped (like shared memory). kPutOnly: like a network,
  /// only a rank's own region is mapped, and puts read their source at flush(), so that
  /// a source changed before the flush shows as wrong data.
  enum class Writes { kMapped, kPutOnly };
  InProcessFabric(int num_ranks, std::size_t region_bytes, Writes writes = Writes::kMapped);
  ~InProcessFabric();
  int num_ranks() const { return static_cast<int>(regions_.size()); }
  /// The transport of `rank` (owned by the fabric).
  Transport& transport(int rank);
  /// Direct access to a rank's region (tests poison it or inspect it).
  std::span<std::byte> region(int rank);
  /// Marks a rank dead: puts to it throw PeerFailureError from flush(), it never signals,
  /// and every other rank's transport knows it failed (waits for it end at once).
  void kill(int rank);
  /// Clears a kill mark (the rank's process was replaced; the caller re-zeroes its region).
  void revive(int rank);
  bool dead(int rank) const;

 private:
  class RankTransport;
  std::vector<std::unique_ptr<std::byte[]>> regions_;
  std::size_t region_bytes_;
  std::vector<std::unique_ptr<RankTransport>> transports_;
  std::vector<uint8_t> dead_;
  Writes writes_;
  friend class RankTransport;
};

}  // namespace hyrun::ep
