// The CUDA path's message magic (cuda_kernels.hpp): a slot written in another call must
// not pass the device's header check. Epochs of the elastic runtime differ in their high
// word (phase) or in a few low bits (calls, failure rounds); the format matters too.
#include <gtest/gtest.h>

#include <set>

#include "cuda_kernels.hpp"

using hyrun::ep::kMessageMagic;
using hyrun::ep::cuda::detail::message_magic;

TEST(CudaMessageMagic, DiffersAcrossEpochsAndFormats) {
  std::set<uint32_t> seen;
  int n = 0;
  for (uint64_t phase = 0; phase < 16; ++phase)
    for (uint64_t round = 0; round < 4; ++round)
      for (uint64_t call = 0; call < 64; ++call)
        for (int fp8 = 0; fp8 < 2; ++fp8) {
          const uint64_t epoch = (phase << 32) + (round << 24) + call;
          seen.insert(message_magic(static_cast<uint32_t>(kMessageMagic), fp8, epoch));
          ++n;
        }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(n)) << "two calls share a magic";
  // A zeroed slot (a region never written) never passes.
  EXPECT_EQ(seen.count(0u), 0u);
}

TEST(CudaMessageMagic, SameInputsSameMagic) {
  // Sender and receiver compute it independently from the agreed epoch.
  EXPECT_EQ(message_magic(static_cast<uint32_t>(kMessageMagic), 1, 0x500000007ull),
            message_magic(static_cast<uint32_t>(kMessageMagic), 1, 0x500000007ull));
}
