// hello: the smallest complete hyrun program. Each rank joins the world, prints where it
// runs, passes a buffer of random bytes around a ring of all ranks and checks it at every
// hop, then meets the others at a barrier.
//
//   hyrun -n 4 -- hello [--bytes N]
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <thread>

#include "hyrun/common/logging.hpp"
#include "hyrun/worker.hpp"

namespace {

// FNV-1a: a cheap checksum so every hop can verify the payload it received.
uint64_t checksum(std::span<const std::byte> data) {
  uint64_t h = 1469598103934665603ULL;
  for (std::byte b : data) h = (h ^ std::to_integer<uint64_t>(b)) * 1099511628211ULL;
  return h;
}

std::vector<std::byte> random_payload(std::size_t size) {
  std::random_device seed;
  std::mt19937_64 gen(seed());
  std::vector<std::byte> payload(sizeof(uint64_t) + size);
  for (std::size_t i = sizeof(uint64_t); i < payload.size(); ++i) payload[i] = static_cast<std::byte>(gen());
  const uint64_t sum = checksum(std::span(payload).subspan(sizeof(uint64_t)));
  std::memcpy(payload.data(), &sum, sizeof sum);
  return payload;
}

bool payload_intact(std::span<const std::byte> payload) {
  if (payload.size() < sizeof(uint64_t)) return false;
  uint64_t sum;
  std::memcpy(&sum, payload.data(), sizeof sum);
  return sum == checksum(payload.subspan(sizeof(uint64_t)));
}

int run(std::size_t ring_bytes, bool timestamps) {
  hyrun::World world;
  if (timestamps) {
    // Wall-clock time at which this rank was connected to every other (bench/launch-slurm.sh).
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    std::printf("connected_ns=%lld rank=%d\n", ts.tv_sec * 1000000000LL + ts.tv_nsec, world.rank());
  }
  const int rank = world.rank();
  const int size = world.size();

  std::string host(256, '\0');
  gethostname(host.data(), host.size());
  host.resize(std::strlen(host.c_str()));
  std::printf("hello from rank %d of %d (node %d of %d, local rank %d of %d) pid %d host %s: %s, %d peers\n", rank,
              size, world.node_rank(), world.num_nodes(), world.local_rank(), world.local_size(), getpid(),
              host.c_str(), world.binding().describe().c_str(), size - 1);
  std::fflush(stdout);

  constexpr uint32_t kRingTag = 1;
  const int next = (rank + 1) % size;
  const int prev = (rank + size - 1) % size;
  bool ok = true;
  if (rank == 0) {
    const auto original = random_payload(ring_bytes);
    world.send(next, original, kRingTag);
    const auto back = world.recv(prev, kRingTag);
    ok = back == original;
    std::printf("rank 0: ring of %d ranks %s (%zu bytes)\n", size, ok ? "ok" : "CORRUPTED", ring_bytes);
  } else {
    const auto payload = world.recv(prev, kRingTag);
    ok = payload_intact(payload) && payload.size() == sizeof(uint64_t) + ring_bytes;
    if (!ok) std::printf("rank %d: ring payload from rank %d is CORRUPTED\n", rank, prev);
    world.send(next, payload, kRingTag);
  }
  std::fflush(stdout);
  world.barrier();
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hello: join the hyrun world, pass random bytes around a ring of all ranks, check them"};
  std::size_t ring_bytes = 1 << 20;
  app.add_option("--bytes", ring_bytes, "size of the ring payload")->capture_default_str();
  bool timestamps = false;
  app.add_flag("--timestamps", timestamps, "print the wall-clock time at which the rank was connected");
  int startup_ms = 0;
  app.add_option("--startup-ms", startup_ms,
                 "sleep this long before joining the world, as a program that initialises CUDA or loads a model "
                 "first (bench/launch-slurm.sh)")
      ->check(CLI::Range(0, 600000));
  CLI11_PARSE(app, argc, argv);
  std::this_thread::sleep_for(std::chrono::milliseconds(startup_ms));
  try {
    hyrun::init_logging("hello", hyrun::log_level_from_environment("warn"));
    return run(ring_bytes, timestamps);
  } catch (const hyrun::Error& e) {
    std::fprintf(stderr, "hello: %s\n", e.what());
    return e.exit_code();
  }
}
