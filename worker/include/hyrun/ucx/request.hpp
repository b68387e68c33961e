#pragma once
// A UCP request, as a *_nbx call returns it: completed in place (nullptr), failed at once
// (an error pointer) or in progress. The owner frees an in-progress request exactly once.
#include <ucp/api/ucp.h>

#include <chrono>
#include <functional>
#include <utility>

namespace hyrun::ucx {

class Request {
 public:
  using Clock = std::chrono::steady_clock;

  Request() = default;
  /// Takes the result of a *_nbx call (called without a completion callback).
  explicit Request(ucs_status_ptr_t handle) noexcept : handle_(handle) {}
  ~Request() { release(); }
  Request(Request&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Request& operator=(Request&& other) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  /// UCS_INPROGRESS while it runs, then its completion status (UCS_OK when it completed
  /// in place, its error when it failed at once).
  ucs_status_t status() const noexcept;
  bool in_progress() const noexcept { return status() == UCS_INPROGRESS; }

  /// Progresses `worker` (Progress policy) until the request completes and returns its
  /// status; or UCS_ERR_TIMED_OUT once `deadline` passed, or UCS_ERR_CONNECTION_RESET
  /// once `give_up` (asked now and then) is true: the request then stays in progress and
  /// owned (cancel() or release() it). Never throws.
  ucs_status_t wait(ucp_worker_h worker, Clock::time_point deadline,
                    const std::function<bool()>& give_up = {}) noexcept;
  /// wait(), and when the request did not complete, cancel(). Returns wait()'s status.
  ucs_status_t wait_or_cancel(ucp_worker_h worker, Clock::time_point deadline,
                              const std::function<bool()>& give_up = {}) noexcept;
  /// Asks UCX to cancel it (not every operation can be: sends, RMA), progresses up to
  /// 200 ms for that, then releases it.
  void cancel(ucp_worker_h worker) noexcept;
  /// Frees it now; UCX releases one still in progress whenever it completes (so its
  /// buffers must stay valid until then, or be abandoned with care).
  void release() noexcept;

 private:
  ucs_status_ptr_t handle_ = nullptr;
};

}  // namespace hyrun::ucx
