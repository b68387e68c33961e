// hyrun::ucx::Request: the one bounded wait of the worker library (World's messages and
// closes, the EP transport's flushes), on a real UCP worker talking to itself.
#include "hyrun/ucx/request.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <numeric>
#include <vector>

#include "hyrun/ucx/context.hpp"
#include "hyrun/ucx/endpoint.hpp"
#include "hyrun/ucx/worker.hpp"

namespace hyrun::ucx {
namespace {

using Clock = Request::Clock;
using namespace std::chrono_literals;

// A worker with an endpoint to itself.
struct Loopback {
  Context context = make_context(0, "lo");
  Worker worker = make_worker(context.get());
  Endpoint self{worker.get(), WorkerAddress(worker.get()).bytes(), false, nullptr, nullptr};

  Request receive(std::vector<std::byte>& into, ucp_tag_t tag) {
    ucp_request_param_t param{};
    return Request(ucp_tag_recv_nbx(worker.get(), into.data(), into.size(), tag, ~ucp_tag_t{0}, &param));
  }
  Request send(const std::vector<std::byte>& bytes, ucp_tag_t tag) {
    ucp_request_param_t param{};
    return Request(ucp_tag_send_nbx(self.get(), bytes.data(), bytes.size(), tag, &param));
  }
};

TEST(UcxRequest, CompletedInPlaceOrFailedAtOnceNeedsNoWait) {
  Loopback l;
  EXPECT_EQ(Request().status(), UCS_OK);
  EXPECT_EQ(Request().wait(l.worker.get(), Clock::now()), UCS_OK);
  Request failed(UCS_STATUS_PTR(UCS_ERR_NO_MEMORY));
  EXPECT_FALSE(failed.in_progress());
  EXPECT_EQ(failed.wait(l.worker.get(), Clock::now() + 60s), UCS_ERR_NO_MEMORY);
}

TEST(UcxRequest, SendAndReceiveComplete) {
  Loopback l;
  std::vector<std::byte> sent(1 << 20), got(1 << 20);  // large: a rendezvous transfer
  for (std::size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<std::byte>(i * 7);
  Request recv = l.receive(got, 5);
  Request send = l.send(sent, 5);
  EXPECT_EQ(send.wait(l.worker.get(), Clock::now() + 60s), UCS_OK);
  EXPECT_EQ(recv.wait(l.worker.get(), Clock::now() + 60s), UCS_OK);
  EXPECT_EQ(got, sent);
}

TEST(UcxRequest, WaitEndsAtTheDeadlineAndCancelFreesTheOperation) {
  Loopback l;
  std::vector<std::byte> first(8), second(8);
  Request orphan = l.receive(first, 9);  // nobody sends: only the deadline ends the wait
  EXPECT_EQ(orphan.wait(l.worker.get(), Clock::now() + 50ms), UCS_ERR_TIMED_OUT);
  EXPECT_TRUE(orphan.in_progress());
  orphan.cancel(l.worker.get());
  // The cancelled receive no longer takes the tag's next message: a new one does.
  const std::vector<std::byte> message(8, std::byte{42});
  Request recv = l.receive(second, 9);
  Request send = l.send(message, 9);
  EXPECT_EQ(send.wait(l.worker.get(), Clock::now() + 60s), UCS_OK);
  EXPECT_EQ(recv.wait(l.worker.get(), Clock::now() + 60s), UCS_OK);
  EXPECT_EQ(second, message);
  EXPECT_EQ(first, std::vector<std::byte>(8));
}

TEST(UcxRequest, GiveUpEndsTheWaitLongBeforeTheDeadline) {
  Loopback l;
  std::vector<std::byte> buffer(8);
  Request orphan = l.receive(buffer, 11);
  int asked = 0;
  // A hang here (the deadline is a minute away) is the failure.
  EXPECT_EQ(orphan.wait_or_cancel(l.worker.get(), Clock::now() + 60s, [&] { return ++asked == 3; }),
            UCS_ERR_CONNECTION_RESET);
  EXPECT_EQ(asked, 3);
  EXPECT_FALSE(orphan.in_progress());  // cancelled and released
}

}  // namespace
}  // namespace hyrun::ucx
