#include "hyrun/common/hex.hpp"

#include <fmt/format.h>

#include "hyrun/common/error.hpp"

namespace hyrun {
namespace {
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

std::string to_hex(std::span<const std::byte> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (std::byte b : bytes) {
    const auto v = std::to_integer<unsigned>(b);
    out.push_back(kDigits[v >> 4]);
    out.push_back(kDigits[v & 0xf]);
  }
  return out;
}

std::vector<std::byte> from_hex(std::string_view text, std::string_view what) {
  if (text.size() % 2 != 0)
    throw UsageError(fmt::format("{} is not valid hex: it has an odd number of digits ({})", what, text.size()));
  std::vector<std::byte> out(text.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int hi = hex_value(text[2 * i]);
    const int lo = hex_value(text[2 * i + 1]);
    if (hi < 0 || lo < 0)
      throw UsageError(fmt::format("{} is not valid hex: character {} is '{}', expected 0-9 or a-f", what,
                                   2 * i + (hi < 0 ? 0 : 1), text[2 * i + (hi < 0 ? 0 : 1)]));
    out[i] = static_cast<std::byte>(hi * 16 + lo);
  }
  return out;
}

}  // namespace hyrun
