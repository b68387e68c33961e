#pragma once
// Random byte strings for the tests of encodings and seals (payloads, worker addresses).
#include <cstddef>
#include <random>
#include <vector>

namespace hyrun::test_support {

inline std::vector<std::byte> random_bytes(std::mt19937& gen, std::size_t n) {
  std::vector<std::byte> b(n);
  for (auto& x : b) x = static_cast<std::byte>(gen());
  return b;
}

}  // namespace hyrun::test_support
