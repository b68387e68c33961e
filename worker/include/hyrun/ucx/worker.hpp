#pragma once
// The UCP worker (made from a Context, which must outlive it) and its own address.
#include <ucp/api/ucp.h>

#include <cstddef>
#include <memory>
#include <span>
#include <type_traits>

namespace hyrun::ucx {

struct WorkerDeleter {
  void operator()(ucp_worker_h worker) const noexcept { ucp_worker_destroy(worker); }
};
using Worker = std::unique_ptr<std::remove_pointer_t<ucp_worker_h>, WorkerDeleter>;

/// A single-threaded worker of `context`. Throws Error.
Worker make_worker(ucp_context_h context);

/// The worker's own address, released with ucp_worker_release_address. The worker must
/// outlive it.
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

}  // namespace hyrun::ucx
