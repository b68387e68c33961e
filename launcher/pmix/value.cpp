#include "hyrun/pmix/value.hpp"

#include <cstring>

namespace hyrun::pmix {

std::optional<std::int64_t> integer_of(const pmix_value_t& value) {
  switch (value.type) {
    case PMIX_INT: return value.data.integer;
    case PMIX_INT8: return value.data.int8;
    case PMIX_INT16: return value.data.int16;
    case PMIX_INT32: return value.data.int32;
    case PMIX_INT64: return value.data.int64;
    case PMIX_UINT: return value.data.uint;
    case PMIX_UINT8: return value.data.uint8;
    case PMIX_UINT16: return value.data.uint16;
    case PMIX_UINT32: return value.data.uint32;
    case PMIX_UINT64: return static_cast<std::int64_t>(value.data.uint64);
    case PMIX_SIZE: return static_cast<std::int64_t>(value.data.size);
    case PMIX_PROC_RANK: return value.data.rank;
    default: return std::nullopt;
  }
}

std::optional<std::string> string_of(const pmix_value_t& value) {
  if (value.type != PMIX_STRING || value.data.string == nullptr) return std::nullopt;
  return std::string(value.data.string);
}

std::optional<std::vector<std::byte>> bytes_of(const pmix_value_t& value) {
  if (value.type == PMIX_BYTE_OBJECT) {
    const auto& bo = value.data.bo;
    std::vector<std::byte> out(bo.size);
    if (bo.size > 0) std::memcpy(out.data(), bo.bytes, bo.size);
    return out;
  }
  if (auto text = string_of(value)) {
    std::vector<std::byte> out(text->size());
    std::memcpy(out.data(), text->data(), text->size());
    return out;
  }
  return std::nullopt;
}

}  // namespace hyrun::pmix
