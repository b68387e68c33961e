// Client behaviour that needs no PMIx server, and the small conversions it relies on.
// The behaviour under real servers is covered by pmix-probe in tests/cluster.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "hyrun/common/error.hpp"
#include "hyrun/pmix/client.hpp"
#include "hyrun/pmix/completion.hpp"
#include "hyrun/pmix/status.hpp"
#include "hyrun/pmix/value.hpp"

namespace hyrun::pmix {
namespace {

// A fence waits for other nodes for up to --bootstrap-timeout; a signal to hyrun must end
// that wait. (A hang here is caught by the test's 30 s limit; the wait's own limit is 1 h.)
TEST(PmixCompletion, AStopRequestEndsTheWaitBeforeItsDeadline) {
  auto [completion, cbdata] = Completion::make();
  int asked = 0;
  const auto status = completion->wait_until(std::chrono::steady_clock::now() + std::chrono::hours(1),
                                             [&asked] { return ++asked == 3; });
  EXPECT_FALSE(status.has_value());
  EXPECT_EQ(asked, 3);
  Completion::on_operation(PMIX_SUCCESS, cbdata);  // the late callback still finds live memory
}

TEST(PmixCompletion, TheCallbackEndsTheWaitWhileNoStopIsRequested) {
  auto [completion, cbdata] = Completion::make();
  std::thread progress([cbdata = cbdata] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    Completion::on_operation(PMIX_SUCCESS, cbdata);
  });
  const auto status =
      completion->wait_until(std::chrono::steady_clock::now() + std::chrono::hours(1), [] { return false; });
  progress.join();
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, PMIX_SUCCESS);
}

TEST(PmixClient, ConnectWithoutServerIsNullopt) {
  ::unsetenv("PMIX_NAMESPACE");
  EXPECT_FALSE(Client::connect().has_value());
  // The singleton was finalised: a second attempt behaves the same.
  EXPECT_FALSE(Client::connect().has_value());
}

TEST(PmixClient, AnnouncedButUnreachableServerIsAnError) {
  ::setenv("PMIX_NAMESPACE", "slurm.pmix.999.0", 1);
  EXPECT_THROW(Client::connect(), hyrun::Error);
  ::unsetenv("PMIX_NAMESPACE");
}

TEST(PmixStatus, DescribesNameAndNumber) {
  EXPECT_NE(describe_status(PMIX_ERR_TIMEOUT).find("(-24)"), std::string::npos);
  EXPECT_NO_THROW(throw_if_failed(PMIX_SUCCESS, "x"));
  EXPECT_THROW(throw_if_failed(PMIX_ERR_TIMEOUT, "fence"), hyrun::TimeoutError);
  try {
    throw_if_failed(PMIX_ERR_NOT_FOUND, "PMIx_Get of key 'k'");
    FAIL();
  } catch (const hyrun::Error& e) {
    EXPECT_EQ(e.exit_code(), hyrun::exit_code::kLauncherError);
    EXPECT_NE(std::string(e.what()).find("PMIx_Get of key 'k' failed"), std::string::npos);
  }
}

TEST(PmixValue, ReadsAnyIntegerWidth) {
  pmix_value_t v;
  PMIX_VALUE_CONSTRUCT(&v);
  v.type = PMIX_UINT16;
  v.data.uint16 = 7;
  EXPECT_EQ(integer_of(v), 7);
  v.type = PMIX_UINT32;
  v.data.uint32 = 4000000000u;
  EXPECT_EQ(integer_of(v), 4000000000LL);
  v.type = PMIX_BOOL;
  EXPECT_FALSE(integer_of(v).has_value());
}

TEST(PmixValue, BytesFromByteObjectAndString) {
  char raw[] = {'a', '\0', 'b'};
  pmix_value_t v;
  PMIX_VALUE_CONSTRUCT(&v);
  v.type = PMIX_BYTE_OBJECT;
  v.data.bo.bytes = raw;
  v.data.bo.size = sizeof raw;
  auto bytes = bytes_of(v);
  ASSERT_TRUE(bytes);
  ASSERT_EQ(bytes->size(), 3u);
  EXPECT_EQ((*bytes)[1], std::byte{0});
  char text[] = "host";
  v.type = PMIX_STRING;
  v.data.string = text;
  EXPECT_EQ(string_of(v), "host");
  EXPECT_EQ(bytes_of(v)->size(), 4u);
}

}  // namespace
}  // namespace hyrun::pmix
