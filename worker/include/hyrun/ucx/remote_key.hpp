#pragma once
// A peer's remote key, unpacked on the endpoint to that peer (MappedMemory::pack_rkey
// made it there). Destroy it before the endpoint is closed.
#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

namespace hyrun::ucx {

class RemoteKey {
 public:
  RemoteKey() = default;
  /// Unpacks `packed` on `ep`. Throws Error "<who>: ucp_ep_rkey_unpack of <whose> key failed: <status>".
  RemoteKey(ucp_ep_h ep, const void* packed, std::string_view who, std::string_view whose);
  ~RemoteKey() { reset(); }
  RemoteKey(RemoteKey&& other) noexcept : rkey_(std::exchange(other.rkey_, nullptr)) {}
  RemoteKey& operator=(RemoteKey&& other) noexcept;
  RemoteKey(const RemoteKey&) = delete;
  RemoteKey& operator=(const RemoteKey&) = delete;

  explicit operator bool() const { return rkey_ != nullptr; }
  ucp_rkey_h get() const { return rkey_; }
  /// Where the peer's `remote_address` is mapped into this process (ucp_rkey_ptr, when a
  /// shared-memory transport reaches the peer's memory), or nullptr.
  std::byte* local_pointer(uint64_t remote_address) const noexcept;
  void reset() noexcept;

 private:
  ucp_rkey_h rkey_ = nullptr;
};

}  // namespace hyrun::ucx
