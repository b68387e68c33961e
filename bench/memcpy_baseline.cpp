// The reference for bench/ep.sh's --kernel-only rows: single-core memcpy bandwidth, as
// the EP issue measured it (64 MiB, both buffers touched first).
//
//   memcpy-baseline [MiB] [repetitions]     (defaults 64, 15)
//
// Prints "memcpy MiB=64 median_gbps=X best_gbps=Y" (GB = 1e9 bytes copied per second).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  const long mib = argc > 1 ? std::atol(argv[1]) : 64;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 15;
  if (mib < 1 || mib > 4096 || reps < 1 || reps > 10000) {
    std::fprintf(stderr, "usage: memcpy-baseline [MiB 1..4096] [repetitions 1..10000]\n");
    return 2;
  }
  const std::size_t bytes = static_cast<std::size_t>(mib) << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 2);  // touched: no page faults in the timing
  std::vector<double> gbps;
  for (int r = 0; r < reps; ++r) {
    src[static_cast<std::size_t>(r) % bytes] = static_cast<char>(r);  // the copy is not hoisted
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    const auto t1 = std::chrono::steady_clock::now();
    gbps.push_back(static_cast<double>(bytes) / 1e9 / std::chrono::duration<double>(t1 - t0).count());
  }
  std::sort(gbps.begin(), gbps.end());
  std::printf("memcpy MiB=%ld median_gbps=%.2f best_gbps=%.2f (checksum %d)\n", mib, gbps[gbps.size() / 2], gbps.back(),
              static_cast<int>(dst[bytes / 2]));
  return 0;
}
