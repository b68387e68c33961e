#include "hyrun/ucx/endpoint.hpp"

#include <utility>

#include "hyrun/ucx/check.hpp"

namespace hyrun::ucx {

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
  // that does not finish in time is left to UCX (the request is released, not waited for).
  ucp_request_param_t param{};
  if (force) {  // the peer is known dead: flushing could only fail; needs peer error handling
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  }
  Request(ucp_ep_close_nbx(std::exchange(ep_, nullptr), &param))
      .wait_or_cancel(worker_, Request::Clock::now() + timeout);
}

Request Endpoint::start_close() noexcept {
  if (!ep_) return {};
  ucp_request_param_t param{};
  return Request(ucp_ep_close_nbx(std::exchange(ep_, nullptr), &param));
}

}  // namespace hyrun::ucx
