#pragma once
// Reading typed data out of pmix_value_t. Servers do not agree on integer widths
// (Slurm and Open MPI report some keys as uint16 or uint32), so integers are read
// from any integer type.
#include <pmix.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hyrun::pmix {

/// The integer held by `value`, or nullopt when it holds no integer type.
std::optional<std::int64_t> integer_of(const pmix_value_t& value);

/// The string held by `value` (PMIX_STRING), or nullopt for any other type.
std::optional<std::string> string_of(const pmix_value_t& value);

/// The bytes of a PMIX_BYTE_OBJECT (or the characters of a PMIX_STRING), or nullopt.
std::optional<std::vector<std::byte>> bytes_of(const pmix_value_t& value);

}  // namespace hyrun::pmix
