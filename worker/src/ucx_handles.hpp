#pragma once
// Thin RAII owners of UCP handles. Each one releases its handle exactly once and
// is movable, so error paths during bootstrap leak nothing.
#include <ucp/api/ucp.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>

namespace hyrun::ucx {

/// Throws hyrun::Error "what: <UCX status string>" unless status is UCS_OK.
void check(ucs_status_t status, const std::string& what);

struct ContextDeleter {
  void operator()(ucp_context_h context) const noexcept { ucp_cleanup(context); }
};
struct WorkerDeleter {
  void operator()(ucp_worker_h worker) const noexcept { ucp_worker_destroy(worker); }
};
using Context = std::unique_ptr<std::remove_pointer_t<ucp_context_h>, ContextDeleter>;
using Worker = std::unique_ptr<std::remove_pointer_t<ucp_worker_h>, WorkerDeleter>;

/// A UCP context with tag matching plus `extra_features`. `default_net_devices`, when
/// given, is used as UCX_NET_DEVICES unless the user set that variable.
Context make_context(uint64_t extra_features, const char* default_net_devices = nullptr);

/// Whether UCX_TLS (as set in the environment) lets UCX use a shared-memory transport.
/// UCX 1.13 uses none on endpoints with peer error handling, and reports no peer failure
/// through one, so only endpoints that may use shared memory can do without it.
bool shared_memory_allowed();
/// A single-threaded worker of `context`.
Worker make_worker(ucp_context_h context);

/// The worker's own address, released with ucp_worker_release_address.
class WorkerAddress {
 public:
  explicit WorkerAddress(ucp_worker_h worker);
  ~WorkerAddress();
  WorkerAddress(const WorkerAddress&) = delete;
  WorkerAddress& operator=(const WorkerAddress&) = delete;
  std::span<const std::byte> bytes() const { return {reinterpret_cast<const std::byte*>(address_), length_}; }

 private:
  ucp_worker_h worker_;
  ucp_address_t* address_ = nullptr;
  std::size_t length_ = 0;
};

/// Called (from ucp_worker_progress) when an endpoint in peer error-handling mode fails.
using PeerFailureHandler = void (*)(void* arg, ucp_ep_h ep, ucs_status_t status);

/// An endpoint to a remote worker address. Closing flushes outstanding operations for
/// at most `close_timeout`, then forces the close, so a dead peer never hangs teardown.
class Endpoint {
 public:
  Endpoint() = default;
  Endpoint(ucp_worker_h worker, std::span<const std::byte> remote_address, bool peer_error_handling,
           PeerFailureHandler on_failure, void* failure_arg);
  ~Endpoint() { close(std::chrono::seconds(5)); }
  Endpoint(Endpoint&& other) noexcept { *this = std::move(other); }
  Endpoint& operator=(Endpoint&& other) noexcept;
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  ucp_ep_h get() const { return ep_; }
  /// Closes (flushing, or at once with `force`, which needs peer error handling) within `timeout`.
  void close(std::chrono::milliseconds timeout, bool force = false) noexcept;
  /// Starts a flushing close and gives up ownership; the caller waits for the request
  /// (wait_request) so that many endpoints can close under one deadline.
  void* start_close() noexcept;

 private:
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
};

/// Progresses a worker while waiting. When nothing happens for a while it yields the
/// CPU: ranks often outnumber cores (many ranks per GPU node, CI machines), and a
/// busy-polling waiter would otherwise starve the very peer it waits for.
class Progress {
 public:
  void operator()(ucp_worker_h worker);

 private:
  /// Idle polls after which each further idle poll sleeps 200 us (waits of data in flight
  /// end long before: tens of milliseconds of nothing).
  static constexpr unsigned kSleepAfterIdle = 1u << 15;
  unsigned idle_ = 0;
};

/// Progresses `worker` until `request` completes or `deadline` passes. Frees the request.
/// Returns the completion status, or UCS_ERR_TIMED_OUT after cancelling it, or
/// UCS_ERR_CONNECTION_RESET after cancelling it once `give_up` (asked now and then) is true.
ucs_status_t wait_request(ucp_worker_h worker, void* request, std::chrono::steady_clock::time_point deadline,
                          const std::function<bool()>& give_up = {});

}  // namespace hyrun::ucx
