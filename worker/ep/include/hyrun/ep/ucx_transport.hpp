#pragma once
// One-sided EP transport over UCX, built on hyrun::World (worker.hpp). Collective
// construction: every rank of the World constructs it at the same point.
//
//   hyrun::World world;                 // needs UCP_FEATURE_RMA (WorldOptions default)
//   hyrun::ep::UcxTransport tx(world, hyrun::ep::region_bytes(shape), world.timeout());
//   hyrun::ep::HostBackend ep(shape, tx, timeout);
//
// Construction: maps the receive region with ucp_mem_map (allocating zeroed,
// page-aligned host memory, or the caller's memory), packs its rkey, exchanges
// {address, length, rkey} with World::allgatherv, unpacks every peer's rkey on
// world.endpoint(peer). put() is ucp_put_nbx; flush() completes every request and
// then ucp_ep_flush_nbx on every peer written since the last flush, each bounded by the
// timeout (a failing peer is reported by rank in PeerFailureError); signal() is an
// 8-byte ucp_put_nbx of the epoch; wait_signals() polls the local words while driving
// ucp_worker_progress until the deadline. Writes to this rank itself are memcpy.
#include <ucp/api/ucp.h>

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <span>
#include <vector>

#include "hyrun/ep/transport.hpp"
#include "hyrun/worker.hpp"

namespace hyrun::ep {

/// What the transport needs from a bootstrap: World provides it (the World constructors
/// below fill it from the World); tests fill it from raw UCP objects.
struct UcxBootstrap {
  int rank = 0;
  int size = 1;
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  std::function<ucp_ep_h(int peer)> endpoint;  ///< never called for peer == rank
  std::function<std::vector<std::vector<std::byte>>(std::span<const std::byte>)> allgatherv;
};

class UcxTransport final : public Transport {
 public:
  /// Allocates and maps `region_bytes` of zeroed host memory. `timeout` bounds flushes.
  /// (Defined in ucx_transport_world.cpp: the only code that needs World.)
  UcxTransport(World& world, std::size_t region_bytes, std::chrono::milliseconds timeout);
  /// Maps caller-owned memory (e.g. cudaMalloc'ed, if UCX was built with CUDA support);
  /// the caller zeroes it and keeps it alive longer than the transport.
  UcxTransport(World& world, void* region, std::size_t region_bytes, std::chrono::milliseconds timeout);
  /// The same from an explicit bootstrap (region == nullptr: allocate and zero).
  UcxTransport(const UcxBootstrap& boot, void* region, std::size_t region_bytes, std::chrono::milliseconds timeout);
  ~UcxTransport() override;
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  int rank() const override { return rank_; }
  int num_ranks() const override { return size_; }
  std::span<std::byte> region() override { return {static_cast<std::byte*>(base_), bytes_}; }
  void put(int peer, std::size_t remote_offset, const void* src, std::size_t len) override;
  void signal(int peer, std::size_t remote_offset, uint64_t value) override;
  void flush() override;

 private:
  void init(const UcxBootstrap& boot);
  void cleanup() noexcept;
  void check(int peer, std::size_t off, std::size_t len) const;
  void track(int peer, ucs_status_ptr_t sp, const char* what);
  /// Waits for `req` until `deadline`; returns its status (UCS_ERR_TIMED_OUT on deadline).
  ucs_status_t wait_request(void* req, Clock::time_point deadline);
  /// One ucp_worker_progress; yields the CPU after kIdlePollsBeforeYield calls in a row
  /// that made no progress.
  void progress_or_yield();
  void progress_while_waiting() override { progress_or_yield(); }
  static constexpr int kIdlePollsBeforeYield = 64;
  int idle_polls_ = 0;

  struct Peer {
    ucp_ep_h ep = nullptr;
    ucp_rkey_h rkey = nullptr;
    uint64_t address = 0;
    std::size_t length = 0;
    bool dirty = false;  // written since the last flush
  };
  int rank_ = 0;
  int size_ = 0;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
  bool owned_ = false;
  ucp_mem_h memh_ = nullptr;
  std::chrono::milliseconds timeout_;
  std::vector<Peer> peers_;
  std::vector<std::pair<int, void*>> pending_;  // (peer, request) of puts/signals not yet completed
  std::deque<uint64_t> signal_values_;          // sources of signal puts, stable until flush
  std::vector<int> failed_;                     // peers whose operations failed since the last flush
};

}  // namespace hyrun::ep
