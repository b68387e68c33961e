#include "ucx_handles.hpp"

#include <fmt/format.h>

#include <sched.h>
#include <time.h>
#include <signal.h>
#include <ucs/debug/debug.h>

#include <cstdlib>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>

#include "hyrun/common/error.hpp"

namespace hyrun::ucx {

void check(ucs_status_t status, const std::string& what) {
  if (status != UCS_OK) throw Error(fmt::format("{}: {}", what, ucs_status_string(status)));
}

Context make_context(uint64_t extra_features, const char* default_net_devices) {
  ucp_config_t* config = nullptr;
  check(ucp_config_read(nullptr, nullptr, &config), "reading the UCX configuration (UCX_* variables)");
  if (default_net_devices && !std::getenv("UCX_NET_DEVICES")) {
    const ucs_status_t status = ucp_config_modify(config, "NET_DEVICES", default_net_devices);
    if (status != UCS_OK) ucp_config_release(config);
    check(status, fmt::format("setting UCX_NET_DEVICES={}", default_net_devices));
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | extra_features;
  ucp_context_h context = nullptr;
  const ucs_status_t status = ucp_init(&params, config, &context);
  ucp_config_release(config);
  check(status, "creating the UCP context");
  // UCX catches its debug signal (UCX_DEBUG_SIGNO, SIGHUP by default) even when it does
  // nothing with it, so a hang-up (a closed terminal, hyrun forwarding SIGHUP) would not
  // end the rank and hyrun would wait its whole grace period. Unless the user chose a
  // debug signal, SIGHUP gets back its usual meaning.
  if (std::getenv("UCX_DEBUG_SIGNO") == nullptr) ucs_debug_disable_signal(SIGHUP);
  return Context(context);
}

bool shared_memory_allowed() {
  const char* value = std::getenv("UCX_TLS");
  if (!value || !*value) return true;
  std::string tls = value;
  const bool exclude = tls.front() == '^';
  if (exclude) tls.erase(0, 1);
  bool names_shm = false, names_all = false;
  std::size_t start = 0;
  while (start <= tls.size()) {
    const std::size_t end = std::min(tls.find(',', start), tls.size());
    const std::string name = tls.substr(start, end - start);
    names_all |= name == "all";
    // UCX's shared-memory transports and the aliases that include them
    for (const char* shm : {"sm", "shm", "mm", "posix", "sysv", "xpmem", "cma", "knem"}) names_shm |= name == shm;
    start = end + 1;
  }
  return exclude ? !names_shm && !names_all : names_shm || names_all;
}

Worker make_worker(ucp_context_h context) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucp_worker_h worker = nullptr;
  check(ucp_worker_create(context, &params, &worker), "creating the UCP worker");
  return Worker(worker);
}

WorkerAddress::WorkerAddress(ucp_worker_h worker) : worker_(worker) {
  check(ucp_worker_get_address(worker, &address_, &length_), "reading the UCP worker address");
}

WorkerAddress::~WorkerAddress() {
  if (address_) ucp_worker_release_address(worker_, address_);
}

Endpoint::Endpoint(ucp_worker_h worker, std::span<const std::byte> remote_address, bool peer_error_handling,
                   PeerFailureHandler on_failure, void* failure_arg)
    : worker_(worker) {
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.address = reinterpret_cast<const ucp_address_t*>(remote_address.data());
  params.err_mode = peer_error_handling ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  if (peer_error_handling && on_failure) {
    params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.err_handler.cb = on_failure;
    params.err_handler.arg = failure_arg;
  }
  check(ucp_ep_create(worker, &params, &ep_), "creating a UCP endpoint");
}

Endpoint& Endpoint::operator=(Endpoint&& other) noexcept {
  if (this != &other) {
    close(std::chrono::seconds(5));
    worker_ = std::exchange(other.worker_, nullptr);
    ep_ = std::exchange(other.ep_, nullptr);
  }
  return *this;
}

void Endpoint::close(std::chrono::milliseconds timeout, bool force) noexcept {
  if (!ep_) return;
  // One close per endpoint: a second one is an error even when the first failed. A close
  // that does not finish in time is left to UCX (wait_request frees it on completion).
  ucp_request_param_t param{};
  if (force) {  // the peer is known dead: flushing could only fail; needs peer error handling
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  }
  wait_request(worker_, ucp_ep_close_nbx(std::exchange(ep_, nullptr), &param),
               std::chrono::steady_clock::now() + timeout);
}

void Progress::operator()(ucp_worker_h worker) {
  if (ucp_worker_progress(worker) != 0) {
    idle_ = 0;
    return;
  }
  if (++idle_ < 32) return;
  // Long idle (a rank waiting for a later phase, or to be admitted): sleep a little, since
  // sched_yield gives other processes almost nothing while several waiters spin (a Slurm
  // step starting on the same cores waited seconds behind three idle ranks).
  if (idle_ >= kSleepAfterIdle) {
    timespec pause{0, 200'000};
    nanosleep(&pause, nullptr);
  } else {
    sched_yield();
  }
}

void* Endpoint::start_close() noexcept {
  if (!ep_) return nullptr;
  ucp_request_param_t param{};
  void* request = ucp_ep_close_nbx(std::exchange(ep_, nullptr), &param);
  return request;
}

ucs_status_t wait_request(ucp_worker_h worker, void* request, std::chrono::steady_clock::time_point deadline,
                          const std::function<bool()>& give_up) {
  if (request == nullptr) return UCS_OK;
  if (UCS_PTR_IS_ERR(request)) return UCS_PTR_STATUS(request);
  ucs_status_t status;
  unsigned spins = 0;
  Progress progress;
  while ((status = ucp_request_check_status(request)) == UCS_INPROGRESS) {
    progress(worker);
    // The clock is read every few hundred iterations: progress calls are cheap.
    if (++spins % 256 != 0) continue;
    const bool timed_out = std::chrono::steady_clock::now() > deadline;
    if (timed_out || (give_up && give_up())) {
      ucp_request_cancel(worker, request);
      // Not every operation can be cancelled (sends cannot); give it a moment, then let
      // UCX release it whenever it completes (ucp_request_free allows that).
      const auto cancel_deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
      while (ucp_request_check_status(request) == UCS_INPROGRESS && std::chrono::steady_clock::now() < cancel_deadline)
        ucp_worker_progress(worker);
      ucp_request_free(request);
      return timed_out ? UCS_ERR_TIMED_OUT : UCS_ERR_CONNECTION_RESET;
    }
  }
  ucp_request_free(request);
  return status;
}

}  // namespace hyrun::ucx
