// Joins the world and checks an allgather of every rank's number.
#include <cstdio>
#include <cstring>

#include "hyrun/worker.hpp"

int main() {
  try {
    hyrun::World world;
    const int mine = world.rank() * 10 + 7;
    const auto all = world.allgather(std::as_bytes(std::span(&mine, 1)));
    for (int r = 0; r < world.size(); ++r) {
      int theirs;
      std::memcpy(&theirs, all.data() + r * sizeof(int), sizeof theirs);
      if (theirs != r * 10 + 7) {
        std::printf("rank %d: allgather entry %d is %d, expected %d\n", world.rank(), r, theirs, r * 10 + 7);
        return 1;
      }
    }
    std::printf("user program rank %d of %d: allgather ok\n", world.rank(), world.size());
    world.barrier();
  } catch (const hyrun::Error& e) {
    std::fprintf(stderr, "user-program: %s\n", e.what());
    return e.exit_code();
  }
  return 0;
}
