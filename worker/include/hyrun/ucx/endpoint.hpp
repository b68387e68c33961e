#pragma once
// An endpoint to a remote worker (made on a Worker, which must outlive it).
#include <ucp/api/ucp.h>

#include <chrono>
#include <cstddef>
#include <span>

#include "hyrun/ucx/request.hpp"

namespace hyrun::ucx {

/// Called (from ucp_worker_progress) when an endpoint in peer error-handling mode fails.
using PeerFailureHandler = void (*)(void* arg, ucp_ep_h ep, ucs_status_t status);

/// Closing flushes outstanding operations for at most `close_timeout`, then forces the
/// close, so a dead peer never hangs teardown. Throws Error when UCX refuses to create it.
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
  /// Starts a flushing close and gives up the endpoint; the caller waits for the returned
  /// request, so that many endpoints can close under one deadline.
  Request start_close() noexcept;

 private:
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
};

}  // namespace hyrun::ucx
