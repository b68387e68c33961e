// An MPI program that checks what a user relies on when it runs under hyrun's PMIx server:
// the world is the whole job, a collective and 1 MiB messages with every peer arrive intact
// (random data, every element checked, receive buffers poisoned first). Options make one
// rank abort, skip MPI_Finalize, kill itself, or wait (or every rank sleep before MPI_Init), for
// the failure tests; --print-dirs
// shows where the job's PMIx sockets and shared-memory segments are.
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

struct Options {
  int abort_rank = -1;
  int abort_code = 1;
  int no_finalize_rank = -1;
  int kill_rank = -1;
  int wait_rank = -1;         // waits in a barrier-free loop until killed (signal tests)
  int sleep_before_init = 0;  // seconds, every rank of this process's launch (a late node)
  std::size_t bytes = 1 << 20;
  bool print_dirs = false;
};

std::uint8_t byte_of(std::uint64_t seed, int from, int to, std::size_t i) {
  std::uint64_t x = seed ^ (static_cast<std::uint64_t>(from) << 40) ^ (static_cast<std::uint64_t>(to) << 20) ^ i;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return static_cast<std::uint8_t>(x);
}

// Every rank's random vector is reduced and gathered: each checks every element of the sum.
int check_allreduce(int rank, int size, std::mt19937_64& random) {
  constexpr int kCount = 4096;
  std::vector<std::uint32_t> mine(kCount), sum(kCount, 0xdeadbeef), all(static_cast<std::size_t>(kCount) * size, 0);
  for (auto& v : mine) v = static_cast<std::uint32_t>(random());
  MPI_Allreduce(mine.data(), sum.data(), kCount, MPI_UINT32_T, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allgather(mine.data(), kCount, MPI_UINT32_T, all.data(), kCount, MPI_UINT32_T, MPI_COMM_WORLD);
  int wrong = 0;
  for (int i = 0; i < kCount; ++i) {
    std::uint32_t expected = 0;
    for (int r = 0; r < size; ++r) expected += all[static_cast<std::size_t>(r) * kCount + i];
    if (sum[static_cast<std::size_t>(i)] != expected) ++wrong;
  }
  if (wrong) std::printf("rank %d: allreduce: %d of %d elements wrong\n", rank, wrong, kCount);
  return wrong;
}

// 1 MiB (by default) with every peer, both ways, pairwise in a fixed order.
int check_sendrecv(int rank, int size, std::uint64_t seed, std::size_t bytes) {
  std::vector<std::uint64_t> seeds(static_cast<std::size_t>(size));
  MPI_Allgather(&seed, 1, MPI_UINT64_T, seeds.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  std::vector<std::uint8_t> out(bytes), in(bytes);
  int wrong = 0;
  for (int step = 1; step < size; ++step) {
    const int to = (rank + step) % size, from = (rank - step + size) % size;
    for (std::size_t i = 0; i < bytes; ++i) out[i] = byte_of(seed, rank, to, i);
    std::fill(in.begin(), in.end(), std::uint8_t{0xa5});
    MPI_Sendrecv(out.data(), static_cast<int>(bytes), MPI_BYTE, to, step, in.data(), static_cast<int>(bytes), MPI_BYTE,
                 from, step, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (std::size_t i = 0; i < bytes; ++i)
      if (in[i] != byte_of(seeds[static_cast<std::size_t>(from)], from, rank, i)) ++wrong;
  }
  if (wrong) std::printf("rank %d: sendrecv: %d bytes wrong\n", rank, wrong);
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app("MPI checks under hyrun");
  app.add_option("--abort-rank", o.abort_rank);
  app.add_option("--abort-code", o.abort_code);
  app.add_option("--no-finalize-rank", o.no_finalize_rank);
  app.add_option("--kill-rank", o.kill_rank);
  app.add_option("--wait-rank", o.wait_rank);
  app.add_option("--bytes", o.bytes);
  app.add_flag("--print-dirs", o.print_dirs);
  app.add_option("--sleep-before-init", o.sleep_before_init);
  CLI11_PARSE(app, argc, argv);

  if (o.sleep_before_init > 0) ::sleep(static_cast<unsigned>(o.sleep_before_init));
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (o.print_dirs && rank == 0) {
    const char* sockets = std::getenv("PMIX_SERVER_TMPDIR");
    const char* segments = std::getenv("OMPI_MCA_btl_vader_backing_directory");
    std::printf("pmix dir: %s\nshm dir: %s\n", sockets ? sockets : "(unset)", segments ? segments : "(unset)");
    std::fflush(stdout);
  }
  std::random_device device;
  std::mt19937_64 random((static_cast<std::uint64_t>(device()) << 32) ^ device());
  int wrong = check_allreduce(rank, size, random);
  wrong += check_sendrecv(rank, size, random(), o.bytes);
  if (rank == o.abort_rank) MPI_Abort(MPI_COMM_WORLD, o.abort_code);
  if (rank == o.kill_rank) raise(SIGKILL);
  if (rank == o.wait_rank) {
    std::printf("rank %d: waiting\n", rank);
    std::fflush(stdout);
    for (;;) pause();
  }
  if (wrong == 0) std::printf("rank %d of %d: ok\n", rank, size);
  std::fflush(stdout);
  if (rank == o.no_finalize_rank) return 0;
  MPI_Finalize();
  return wrong == 0 ? 0 : 1;
}
