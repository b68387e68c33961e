#pragma once
// One-sided EP transport over UCX, built on hyrun::World (worker.hpp). Default
// (PeerAttach::kCollective) construction is collective: every rank of the World
// constructs it at the same point.
//
//   hyrun::World world;                 // needs UCP_FEATURE_RMA (WorldOptions default)
//   hyrun::ep::UcxTransport tx(world, hyrun::ep::region_bytes(shape), world.timeout());
//   hyrun::ep::HostBackend ep(shape, tx, timeout);
//
// Construction: maps the receive region with ucp_mem_map (letting UCX allocate it, so
// that shared-memory transports can map it into the peers, else zeroed page-aligned host
// memory; or the caller's memory), packs its rkey, exchanges
// {address, length, rkey} with World::allgatherv, unpacks every peer's rkey on
// world.endpoint(peer). put() is ucp_put_nbx; flush() completes every request and
// then ucp_ep_flush_nbx on every peer written since the last flush, each bounded by the
// timeout (a failing peer is reported by rank in PeerFailureError); signal() is an
// 8-byte ucp_put_nbx of the epoch; wait_signals() polls the local words while driving
// ucp_worker_progress until the deadline. Writes to this rank itself are memcpy; where
// a peer's region is mapped here (ucp_rkey_ptr), mapped() lets the caller store into it.
//
// Elastic jobs (ranks whose process dies and is replaced), deferred attachment:
//
//   UcxTransport tx(world, bytes, timeout, PeerAttach::kDeferred);  // maps, no collective
//   auto mine = tx.local_descriptor();         // send it to the peers (any channel)
//   tx.attach_peer(p, descriptor_of_p);         // for each peer, once its descriptor is here
//   ...                                          // p's process dies (World marks it failed):
//   tx.detach_peer(p);                           // forget its rkey; writes to p fail at once
//   world.replace_peer(p, new_address);          // p restarted: new endpoint
//   tx.attach_peer(p, new_descriptor_of_p);      // rkey unpacked on the new endpoint
//
// A peer whose process is known failed (UcxBootstrap::peer_failed, i.e.
// World::peer_failed with WorldOptions::peer_error_handling) gets no more operations:
// puts to it are skipped, outstanding requests to it are abandoned by flush(), which
// reports it in PeerFailureError at once, and wait_signals() ends as soon as it misses it.
//
// After a write to a live peer timed out, the destructor keeps the region mapped (until
// the process exits): late writes of the stalled transfers must not hit unmapped memory.
//
// Where UCX has no RMA transport to a peer (tcp) it emulates puts with active messages, and
// the target answers each put; UCX 1.13 aborts the target when that answer cannot be sent
// because the writer just died (ucp_put_handler, "Fatal: unexpected error: Endpoint
// timeout"). Writes to such peers are therefore sent as this transport's own active
// messages (eager, on the endpoint's one AM lane, so in order with the signal after them),
// which the target stores into its region without answering. That needs UCP_FEATURE_AM in
// the context (World has it); without it, puts are used as before.
#include <ucp/api/ucp.h>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <span>
#include <vector>

#include "hyrun/ep/transport.hpp"
#include "hyrun/ucx/memory.hpp"
#include "hyrun/ucx/progress.hpp"
#include "hyrun/ucx/remote_key.hpp"
#include "hyrun/ucx/request.hpp"
#include "hyrun/worker.hpp"

namespace hyrun::ep {

/// What the transport needs from a bootstrap: World provides it (the World constructors
/// below fill it from the World); tests fill it from raw UCP objects.
struct UcxBootstrap {
  int rank = 0;
  int size = 1;
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  /// The current endpoint to `peer` (never called for peer == rank). Called by every
  /// attach_peer, so after the peer was replaced it must return the new endpoint.
  std::function<ucp_ep_h(int peer)> endpoint;
  /// Collective exchange; needed only by PeerAttach::kCollective construction.
  std::function<std::vector<std::vector<std::byte>>(std::span<const std::byte>)> allgatherv;
  /// Optional: true when `peer`'s process is known to have died (World::peer_failed).
  /// Empty: no failure knowledge, waits for a dead peer end at their deadline.
  std::function<bool(int peer)> peer_failed;
};

class UcxTransport final : public Transport {
 public:
  /// Allocates and maps `region_bytes` of zeroed host memory. `timeout` bounds flushes.
  /// (Defined in ucx_transport_world.cpp: the only code that needs World. The World must
  /// outlive the transport; peer_failed comes from World::peer_failed.)
  UcxTransport(World& world, std::size_t region_bytes, std::chrono::milliseconds timeout,
               PeerAttach attach = PeerAttach::kCollective);
  /// Maps caller-owned memory (e.g. cudaMalloc'ed, if UCX was built with CUDA support);
  /// the caller zeroes it and keeps it alive longer than the transport.
  UcxTransport(World& world, void* region, std::size_t region_bytes, std::chrono::milliseconds timeout,
               PeerAttach attach = PeerAttach::kCollective);
  /// The same from an explicit bootstrap (region == nullptr: allocate and zero).
  UcxTransport(const UcxBootstrap& boot, void* region, std::size_t region_bytes, std::chrono::milliseconds timeout,
               PeerAttach attach = PeerAttach::kCollective);
  ~UcxTransport() override;
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  int rank() const override { return rank_; }
  int num_ranks() const override { return size_; }
  std::span<std::byte> region() override { return {static_cast<std::byte*>(region_mem_.get()), bytes_}; }
  void put(int peer, std::size_t remote_offset, const void* src, std::size_t len) override;
  void signal(int peer, std::size_t remote_offset, uint64_t value) override;
  void flush() override;
  /// This rank's region, and a peer's when UCX maps it here (ucp_rkey_ptr: shared-memory
  /// transports, for a region that the transport allocated itself); nullptr otherwise.
  std::byte* mapped(int peer, std::size_t remote_offset, std::size_t len) override;

  /// This rank's region descriptor: u64 address, u64 length, packed rkey (the bytes the
  /// collective construction exchanges).
  std::vector<std::byte> local_descriptor() const override { return descriptor_; }
  /// Unpacks `descriptor` on the bootstrap's current endpoint to `peer`, replacing any
  /// previous rkey of that peer (destroyed); also Error if UCX rejects the key.
  void attach_peer(int peer, std::span<const std::byte> descriptor) override;
  /// Destroys `peer`'s rkey. Call it before World::replace_peer closes its endpoint.
  void detach_peer(int peer) override;
  bool attached(int peer) const;

 protected:
  bool peer_known_failed(int peer) override { return peer_failed_ && peer_failed_(peer); }

 private:
  struct FreeRegion {
    bool owned;
    void operator()(void* p) const noexcept {
      if (owned) std::free(p);
    }
  };

  void allocate_region();  // sets memh_ too when UCX allocated it
  void map_region();
  void pack_descriptor();
  void check(int peer, std::size_t off, std::size_t len) const;
  void retire_signal_values() noexcept;
  /// Registers on_write for the worker's write messages; false when the context lacks AM.
  bool accept_write_messages();
  static ucs_status_t on_write(void* arg, const void* header, std::size_t header_length, void* data, std::size_t length,
                               const ucp_am_recv_param_t* param);
  /// A put, or a write message where the peer's RMA is emulated (Peer::by_message).
  ucs_status_ptr_t start_write(int peer, std::size_t off, const void* src, std::size_t len, bool is_signal);
  /// False when writes to `peer` must not be issued (detached, or known failed).
  bool writable(int peer);
  void track(int peer, ucs_status_ptr_t sp);
  /// Completes or abandons (known failed, or `deadline`) the requests to `peer`
  /// (-1: all), without throwing.
  void drain(int peer, Clock::time_point deadline) noexcept;
  /// Waits for `req` to `peer` until `deadline`; returns its status (UCS_ERR_TIMED_OUT on
  /// deadline, UCS_ERR_CONNECTION_RESET when the peer is known failed meanwhile).
  ucs_status_t wait_request(int peer, ucx::Request& req, Clock::time_point deadline);
  /// The worker library's progress policy (hyrun/ucx/progress.hpp); its idle count starts
  /// again at every flush(), so that each signal wait (which follows the sender's flush)
  /// polls before it yields or sleeps, even where the signals arrive as plain stores.
  void progress_while_waiting() override { progress_(worker_); }
  ucx::Progress progress_;
  // A write to a live peer timed out: writes in either direction may still arrive, so the
  // destructor leaves the region mapped (released at process exit) instead of unmapping it.
  bool writes_may_be_in_flight_ = false;

  struct Peer {
    ucp_ep_h ep = nullptr;
    ucx::RemoteKey rkey;
    uint64_t address = 0;
    std::size_t length = 0;
    std::byte* local = nullptr;  // the region mapped into this process (ucp_rkey_ptr), if it is
    bool dirty = false;          // written since the last flush
    bool by_message = false;     // writes go as write messages (UCX would emulate RMA with puts)
  };
  /// The header of a write message: where in which region, and whether it is a signal word.
  struct WriteHeader {
    uint64_t region = 0;  // the target region's address (its descriptor's): older regions' writes are dropped
    uint64_t offset = 0;
    uint64_t is_signal = 0;
  };
  int rank_ = 0;
  int size_ = 0;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::function<ucp_ep_h(int)> endpoint_;
  std::function<bool(int)> peer_failed_;
  std::size_t bytes_ = 0;
  std::chrono::milliseconds timeout_;
  // Declaration order is teardown order in reverse: rkeys, then the mapping, then memory.
  std::unique_ptr<void, FreeRegion> region_mem_;
  ucx::MappedMemory memh_;
  std::vector<std::byte> descriptor_;
  std::vector<Peer> peers_;
  std::vector<std::pair<int, ucx::Request>> pending_;      // (peer, request) of puts/signals not yet completed
  std::deque<uint64_t> signal_values_;                     // sources of signal puts, stable until flush
  std::list<std::deque<uint64_t>> retired_signal_values_;  // of abandoned requests (see flush)
  std::deque<WriteHeader> headers_;                        // of write messages, stable until flush (UCX reads them)
  std::list<std::deque<WriteHeader>> retired_headers_;     // of abandoned requests
  bool write_messages_ = false;                            // on_write is registered on the worker
  std::vector<int> failed_;                                // peers whose operations failed since the last flush
  std::vector<int> skipped_;                               // detached peers written to since the last flush
};

}  // namespace hyrun::ep
