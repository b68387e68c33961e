#include "hyrun/pmix/completion.hpp"

#include "hyrun/pmix/value.hpp"

#include <algorithm>

namespace hyrun::pmix {

namespace {
using Handle = std::shared_ptr<Completion>;
}

std::pair<std::shared_ptr<Completion>, void*> Completion::make() {
  auto completion = std::make_shared<Completion>();
  return {completion, new Handle(completion)};
}

void Completion::release(void* cbdata) { delete static_cast<Handle*>(cbdata); }

void Completion::on_operation(pmix_status_t status, void* cbdata) {
  std::unique_ptr<Handle> handle(static_cast<Handle*>(cbdata));
  (*handle)->finish(status);
}

void Completion::on_value(pmix_status_t status, pmix_value_t* value, void* cbdata) {
  std::unique_ptr<Handle> handle(static_cast<Handle*>(cbdata));
  Completion& self = **handle;
  // The library frees `value` when this callback returns: copy it now.
  if (status == PMIX_SUCCESS && value != nullptr) {
    std::lock_guard lock(self.mutex_);
    if (auto bytes = bytes_of(*value))
      self.bytes_ = std::move(*bytes);
    else
      self.wrong_type_ = true;
  }
  self.finish(status);
}

void Completion::finish(pmix_status_t status) {
  {
    std::lock_guard lock(mutex_);
    status_ = status;
    done_ = true;
  }
  done_cv_.notify_all();
}

std::optional<pmix_status_t> Completion::wait_until(std::chrono::steady_clock::time_point deadline,
                                                    const std::function<bool()>& stop) {
  constexpr auto kSlice = std::chrono::milliseconds(20);  // how soon a stop request is seen
  std::unique_lock lock(mutex_);
  for (;;) {
    const auto until = stop ? std::min(deadline, std::chrono::steady_clock::now() + kSlice) : deadline;
    if (done_cv_.wait_until(lock, until, [this] { return done_; })) return status_;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    lock.unlock();
    const bool stopped = stop();
    lock.lock();
    if (stopped && !done_) return std::nullopt;
  }
}

}  // namespace hyrun::pmix
