// MPI under a launcher: how long MPI_Init and the whole run take on each rank, and a
// ping-pong curve between ranks 0 and 1 (latency and bandwidth per message size), every
// received byte checked. bench/mpi.sh runs it under hyrun and mpirun in the same run,
// bench/mpi-slurm.sh under hyrun in hybrid mode and srun (--peer: rank 0's partner, on
// another node).
//   mpi-pingpong [--no-pingpong] [--max-bytes N] [--peer R]
// Output: per rank "times rank R init_ms I run_ms T"; rank 0 "pingpong BYTES LAT_US MB_S".
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// Ranks 0 and `peer` bounce `bytes` back and forth; returns the one-way time in microseconds.
double bounce(int rank, int peer, std::size_t bytes, int iterations, std::vector<unsigned char>& buffer) {
  const int count = static_cast<int>(bytes);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = Clock::now();
  for (int i = 0; i < iterations; ++i) {
    if (rank == 0) {
      MPI_Send(buffer.data(), count, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
      MPI_Recv(buffer.data(), count, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == peer) {
      MPI_Recv(buffer.data(), count, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buffer.data(), count, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
    }
  }
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / (2.0 * iterations);
}

}  // namespace

int main(int argc, char** argv) {
  const auto start = Clock::now();
  MPI_Init(&argc, &argv);
  const double init_ms = ms_since(start);
  bool pingpong = true;
  std::size_t max_bytes = 4u << 20;
  int peer = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no-pingpong") == 0) pingpong = false;
    if (std::strcmp(argv[i], "--max-bytes") == 0 && i + 1 < argc) max_bytes = std::stoul(argv[++i]);
    if (std::strcmp(argv[i], "--peer") == 0 && i + 1 < argc) peer = std::stoi(argv[++i]);
  }
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int bad = 0;
  if (pingpong && size >= 2 && (peer < 1 || peer >= size)) {
    if (rank == 0) std::fprintf(stderr, "mpi-pingpong: --peer %d is not a rank of 1..%d\n", peer, size - 1);
    MPI_Finalize();
    return 2;
  }
  if (pingpong && size >= 2) {
    std::vector<unsigned char> buffer(max_bytes);
    for (std::size_t bytes = 1; bytes <= max_bytes; bytes *= 4) {
      for (std::size_t i = 0; i < bytes; ++i) buffer[i] = static_cast<unsigned char>(i * 7 + bytes);
      const int iterations = bytes <= 65536 ? 1000 : 100;
      bounce(rank, peer, bytes, 10, buffer);  // warm-up: connections and registrations
      const double us = bounce(rank, peer, bytes, iterations, buffer);
      for (std::size_t i = 0; i < bytes && (rank == 0 || rank == peer); ++i)
        if (buffer[i] != static_cast<unsigned char>(i * 7 + bytes)) ++bad;
      if (rank == 0) std::printf("pingpong %zu %.2f %.2f\n", bytes, us, static_cast<double>(bytes) / us);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  std::printf("times rank %d init_ms %.1f run_ms %.1f\n", rank, init_ms, ms_since(start));
  if (bad) std::printf("rank %d: %d bytes wrong\n", rank, bad);
  return bad ? 1 : 0;
}
