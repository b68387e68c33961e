#include "hyrun/ucx/memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>

#include "hyrun/ucx/check.hpp"

namespace hyrun::ucx {
namespace {

// What was kept until exit: the mappings (held here, so that they stay reachable: kept, not
// lost) and their contexts. Few (one a rank), never removed.
struct Kept {
  std::mutex mutex;
  std::vector<ucp_context_h> contexts;
  std::vector<ucp_mem_h> mappings;
};
Kept& kept() {
  static Kept k;
  return k;
}

}  // namespace

MappedMemory MappedMemory::map(ucp_context_h context, void* address, std::size_t length, std::string_view who) {
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  params.address = address;
  params.length = length;
  ucp_mem_h memh = nullptr;
  check(ucp_mem_map(context, &params, &memh), fmt::format("{}: ucp_mem_map of {} bytes failed", who, length));
  return MappedMemory(context, memh, address, length);
}

std::optional<MappedMemory> MappedMemory::allocate(ucp_context_h context, std::size_t length) {
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  params.address = nullptr;
  params.length = length;
  params.flags = UCP_MEM_MAP_ALLOCATE;
  ucp_mem_h memh = nullptr;
  if (ucp_mem_map(context, &params, &memh) != UCS_OK) return std::nullopt;
  MappedMemory mapped(context, memh, nullptr, 0);  // unmapped again if the query disappoints
  ucp_mem_attr_t attr{};
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
  if (ucp_mem_query(memh, &attr) != UCS_OK || attr.address == nullptr || attr.length < length) return std::nullopt;
  mapped.address_ = attr.address;
  mapped.length_ = length;
  return mapped;
}

MappedMemory& MappedMemory::operator=(MappedMemory&& other) noexcept {
  if (this != &other) {
    reset();
    context_ = std::exchange(other.context_, nullptr);
    memh_ = std::exchange(other.memh_, nullptr);
    address_ = std::exchange(other.address_, nullptr);
    length_ = std::exchange(other.length_, 0);
  }
  return *this;
}

void MappedMemory::reset() noexcept {
  if (memh_) ucp_mem_unmap(context_, memh_);
  memh_ = nullptr;
}

void MappedMemory::keep_until_exit() noexcept {
  if (memh_ == nullptr) return;
  Kept& k = kept();
  const std::scoped_lock lock(k.mutex);
  k.mappings.push_back(std::exchange(memh_, nullptr));
  if (std::find(k.contexts.begin(), k.contexts.end(), context_) == k.contexts.end()) k.contexts.push_back(context_);
}

bool MappedMemory::kept_until_exit(ucp_context_h context) noexcept {
  Kept& k = kept();
  const std::scoped_lock lock(k.mutex);
  return std::find(k.contexts.begin(), k.contexts.end(), context) != k.contexts.end();
}

std::vector<std::byte> MappedMemory::pack_rkey(std::string_view who) const {
  void* buffer = nullptr;
  std::size_t length = 0;
  check(ucp_rkey_pack(context_, memh_, &buffer, &length), fmt::format("{}: ucp_rkey_pack failed", who));
  const auto release = [](void* b) { ucp_rkey_buffer_release(b); };
  const std::unique_ptr<void, decltype(release)> packed(buffer, release);
  std::vector<std::byte> out(length);
  std::memcpy(out.data(), buffer, length);
  return out;
}

}  // namespace hyrun::ucx
