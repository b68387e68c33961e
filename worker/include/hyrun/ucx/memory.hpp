#pragma once
// Memory registered with a UCP context for remote access (ucp_mem_map), and the packed
// remote key that peers unpack (RemoteKey) to write into it. The context must outlive it.
#include <ucp/api/ucp.h>

#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace hyrun::ucx {

class MappedMemory {
 public:
  MappedMemory() = default;
  /// Registers the caller's `length` bytes at `address` (which stay the caller's). Throws
  /// Error "<who>: ucp_mem_map of N bytes failed: <status>".
  static MappedMemory map(ucp_context_h context, void* address, std::size_t length, std::string_view who);
  /// Lets UCX allocate at least `length` bytes and map them: memory from a shared-memory
  /// transport (posix, sysv) that peers on this node can map (ucp_rkey_ptr). nullopt
  /// when UCX cannot. The memory goes with the mapping.
  static std::optional<MappedMemory> allocate(ucp_context_h context, std::size_t length);
  ~MappedMemory() { reset(); }
  MappedMemory(MappedMemory&& other) noexcept { *this = std::move(other); }
  MappedMemory& operator=(MappedMemory&& other) noexcept;
  MappedMemory(const MappedMemory&) = delete;
  MappedMemory& operator=(const MappedMemory&) = delete;

  explicit operator bool() const { return memh_ != nullptr; }
  ucp_mem_h get() const { return memh_; }
  void* address() const { return address_; }
  std::size_t length() const { return length_; }
  /// The remote key of the mapping, packed for a peer. Throws Error naming `who`.
  std::vector<std::byte> pack_rkey(std::string_view who) const;
  /// Unmaps now (an empty one is left).
  void reset() noexcept;
  /// Gives the mapping up without unmapping it: it stays until the process exits (late
  /// remote writes must not land in unmapped memory), and so does its context.
  void keep_until_exit() noexcept;
  /// Whether some mapping of `context` was kept until exit.
  static bool kept_until_exit(ucp_context_h context) noexcept;

 private:
  MappedMemory(ucp_context_h context, ucp_mem_h memh, void* address, std::size_t length)
      : context_(context), memh_(memh), address_(address), length_(length) {}
  ucp_context_h context_ = nullptr;
  ucp_mem_h memh_ = nullptr;
  void* address_ = nullptr;
  std::size_t length_ = 0;
};

}  // namespace hyrun::ucx
