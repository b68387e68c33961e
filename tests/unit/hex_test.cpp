#include <gtest/gtest.h>

#include <random>

#include "hyrun/common/error.hpp"
#include "hyrun/common/hex.hpp"

namespace hyrun {
namespace {

TEST(Hex, RoundTripsRandomBytes) {
  std::mt19937 gen(std::random_device{}());
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<std::byte> bytes(gen() % 300);
    for (auto& b : bytes) b = static_cast<std::byte>(gen());
    EXPECT_EQ(from_hex(to_hex(bytes), "test"), bytes);
  }
}

TEST(Hex, KnownValue) {
  EXPECT_EQ(to_hex(std::vector<std::byte>{std::byte{0x00}, std::byte{0xAB}, std::byte{0x7f}}), "00ab7f");
}

TEST(Hex, NamesTheInputInErrors) {
  try {
    from_hex("abc", "HYRUN_ROOT_ADDRESS");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("HYRUN_ROOT_ADDRESS is not valid hex: it has an odd number"),
              std::string::npos);
  }
  try {
    from_hex("0g", "X");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("character 1 is 'g'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hyrun
