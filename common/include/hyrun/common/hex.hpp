#pragma once
// Hex encoding of opaque bytes (UCX worker addresses) so that they travel safely
// through environment variables, pipes and PMIx strings.
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hyrun {

std::string to_hex(std::span<const std::byte> bytes);

/// Throws UsageError naming `what` if `text` is not an even-length string of hex digits.
std::vector<std::byte> from_hex(std::string_view text, std::string_view what);

}  // namespace hyrun
