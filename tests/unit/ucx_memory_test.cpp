// hyrun::ucx::MappedMemory and RemoteKey: memory mapped for remote writes, its packed key
// unpacked on an endpoint, a put through it (a worker writing into itself).
#include "hyrun/ucx/memory.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "hyrun/ucx/context.hpp"
#include "hyrun/ucx/endpoint.hpp"
#include "hyrun/ucx/remote_key.hpp"
#include "hyrun/ucx/request.hpp"
#include "hyrun/ucx/worker.hpp"

namespace hyrun::ucx {
namespace {

using namespace std::chrono_literals;

struct Loopback {
  Context context = make_context(UCP_FEATURE_RMA, "lo");
  Worker worker = make_worker(context.get());
  Endpoint self{worker.get(), WorkerAddress(worker.get()).bytes(), false, nullptr, nullptr};

  // Puts `value` at `offset` of `memory` through a key unpacked from its packed form.
  void put(const MappedMemory& memory, std::size_t offset, const uint64_t& value) {
    const auto packed = memory.pack_rkey("test");
    ASSERT_FALSE(packed.empty());
    const RemoteKey key(self.get(), packed.data(), "test", "its own");
    ASSERT_TRUE(key);
    const uint64_t remote = reinterpret_cast<uintptr_t>(memory.address()) + offset;
    ucp_request_param_t param{};
    const auto deadline = Request::Clock::now() + 60s;
    ASSERT_EQ(
        Request(ucp_put_nbx(self.get(), &value, sizeof value, remote, key.get(), &param)).wait(worker.get(), deadline),
        UCS_OK);
    ASSERT_EQ(Request(ucp_ep_flush_nbx(self.get(), &param)).wait(worker.get(), deadline), UCS_OK);
    // Where the key maps the memory here (shared memory, possibly at another address), a
    // store through that mapping lands in the same bytes.
    if (std::byte* local = key.local_pointer(remote)) {
      const uint64_t stored = ~value;
      std::memcpy(local, &stored, sizeof stored);
      uint64_t seen = 0;
      std::memcpy(&seen, static_cast<std::byte*>(memory.address()) + offset, sizeof seen);
      EXPECT_EQ(seen, stored);
      std::memcpy(local, &value, sizeof value);
    }
  }
};

TEST(UcxMappedMemory, PutThroughTheRemoteKeyLandsInCallerMemory) {
  Loopback l;
  std::vector<uint64_t> mine(512, 0);
  {
    const MappedMemory memory = MappedMemory::map(l.context.get(), mine.data(), mine.size() * 8, "test");
    ASSERT_TRUE(memory);
    EXPECT_EQ(memory.address(), mine.data());
    l.put(memory, 8 * 100, 0x1234'5678'9abc'def0);
  }
  EXPECT_EQ(mine[100], 0x1234'5678'9abc'def0u);
  EXPECT_EQ(mine[99], 0u);
  EXPECT_EQ(mine[101], 0u);
}

TEST(UcxMappedMemory, PutThroughTheRemoteKeyLandsInMemoryUcxAllocated) {
  Loopback l;
  auto memory = MappedMemory::allocate(l.context.get(), 4096);
  if (!memory) GTEST_SKIP() << "this UCX cannot allocate mapped memory";
  ASSERT_NE(memory->address(), nullptr);
  EXPECT_EQ(memory->length(), 4096u);
  std::memset(memory->address(), 0, 4096);
  l.put(*memory, 8, 77);
  uint64_t got = 0;
  std::memcpy(&got, static_cast<std::byte*>(memory->address()) + 8, 8);
  EXPECT_EQ(got, 77u);
}

TEST(UcxMappedMemory, MovedFromIsEmptyAndUnmapsOnce) {
  Loopback l;
  std::vector<std::byte> bytes(4096);
  MappedMemory a = MappedMemory::map(l.context.get(), bytes.data(), bytes.size(), "test");
  MappedMemory b = std::move(a);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): the moved-from state is the contract
  EXPECT_TRUE(b);
  b.reset();
  EXPECT_FALSE(b);
}

// A mapping kept until exit (the transport's after a write timed out) keeps its context:
// ucp_cleanup with a region still mapped asserts and aborts the process (UCX 1.13).
// Worker, endpoint and context are destroyed here as a rank's teardown does, in a child.
TEST(UcxMappedMemoryDeathTest, AMappingKeptUntilExitSurvivesItsContextsTeardown) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        static std::vector<std::byte> bytes(1 << 20);
        {
          Loopback l;
          MappedMemory kept = MappedMemory::map(l.context.get(), bytes.data(), bytes.size(), "test");
          auto allocated = MappedMemory::allocate(l.context.get(), 4096);
          l.put(kept, 64, 0x5eed);
          kept.keep_until_exit();
          if (allocated) allocated->keep_until_exit();
        }
        uint64_t seen = 0;
        std::memcpy(&seen, bytes.data() + 64, sizeof seen);
        // Another context, with nothing kept, is still cleaned up as usual.
        { Loopback other; }
        // _exit: what was kept is meant to outlive everything until the process ends, which
        // LeakSanitizer's check at exit (the ASan pass) would report as a leak.
        ::_exit(seen == 0x5eed ? 0 : 3);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace hyrun::ucx
