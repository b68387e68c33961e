#include "hyrun/ucx/worker.hpp"

#include "hyrun/ucx/check.hpp"

namespace hyrun::ucx {

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

}  // namespace hyrun::ucx
