#include "hyrun/ucx/request.hpp"

#include "hyrun/ucx/progress.hpp"

namespace hyrun::ucx {

namespace {
bool is_request(ucs_status_ptr_t handle) { return handle != nullptr && !UCS_PTR_IS_ERR(handle); }
}  // namespace

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    release();
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

ucs_status_t Request::status() const noexcept {
  if (handle_ == nullptr) return UCS_OK;
  if (UCS_PTR_IS_ERR(handle_)) return UCS_PTR_STATUS(handle_);
  return ucp_request_check_status(handle_);
}

ucs_status_t Request::wait(ucp_worker_h worker, Clock::time_point deadline,
                           const std::function<bool()>& give_up) noexcept {
  ucs_status_t status;
  unsigned spins = 0;
  Progress progress;
  while ((status = this->status()) == UCS_INPROGRESS) {
    progress(worker);
    // The clock (and give_up) is read every few hundred iterations: progress calls are cheap.
    if (++spins % 256 != 0) continue;
    if (Clock::now() > deadline) return UCS_ERR_TIMED_OUT;
    try {
      if (give_up && give_up()) return UCS_ERR_CONNECTION_RESET;
    } catch (...) {
      return UCS_ERR_CONNECTION_RESET;  // a failing failure check: stop waiting rather than throw from here
    }
  }
  return status;
}

ucs_status_t Request::wait_or_cancel(ucp_worker_h worker, Clock::time_point deadline,
                                     const std::function<bool()>& give_up) noexcept {
  const ucs_status_t status = wait(worker, deadline, give_up);
  if (in_progress()) cancel(worker);
  return status;
}

void Request::cancel(ucp_worker_h worker) noexcept {
  if (!is_request(handle_)) return;
  ucp_request_cancel(worker, handle_);
  // Not every operation can be cancelled (sends cannot); give it a moment, then let UCX
  // release it whenever it completes.
  const auto until = Clock::now() + std::chrono::milliseconds(200);
  while (ucp_request_check_status(handle_) == UCS_INPROGRESS && Clock::now() < until) ucp_worker_progress(worker);
  release();
}

void Request::release() noexcept {
  if (is_request(handle_)) ucp_request_free(handle_);
  handle_ = nullptr;
}

}  // namespace hyrun::ucx
