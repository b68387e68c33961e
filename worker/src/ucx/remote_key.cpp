#include "hyrun/ucx/remote_key.hpp"

#include <fmt/format.h>

#include "hyrun/ucx/check.hpp"

namespace hyrun::ucx {

RemoteKey::RemoteKey(ucp_ep_h ep, const void* packed, std::string_view who, std::string_view whose) {
  check(ucp_ep_rkey_unpack(ep, packed, &rkey_), fmt::format("{}: ucp_ep_rkey_unpack of {} key failed", who, whose));
}

RemoteKey& RemoteKey::operator=(RemoteKey&& other) noexcept {
  if (this != &other) {
    reset();
    rkey_ = std::exchange(other.rkey_, nullptr);
  }
  return *this;
}

std::byte* RemoteKey::local_pointer(uint64_t remote_address) const noexcept {
  void* local = nullptr;
  if (!rkey_ || ucp_rkey_ptr(rkey_, remote_address, &local) != UCS_OK) return nullptr;
  return static_cast<std::byte*>(local);
}

void RemoteKey::reset() noexcept {
  if (rkey_) ucp_rkey_destroy(rkey_);
  rkey_ = nullptr;
}

}  // namespace hyrun::ucx
