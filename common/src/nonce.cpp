#include "hyrun/common/nonce.hpp"

#include <fmt/format.h>

#include <array>

#include "hyrun/common/hex.hpp"
#include "hyrun/common/random_bytes.hpp"

namespace hyrun {

std::string new_nonce(std::string_view what) {
  std::array<std::byte, 16> bytes{};
  fill_random(bytes, fmt::format("the nonce of {}", what));
  return to_hex(bytes);
}

}  // namespace hyrun
