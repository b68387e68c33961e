#pragma once
// Runs node links' loops in a test, as hyrun's supervisor loop would: polls every link's
// sockets, hands each ready one to its link, then ticks them all (silence, deadlines).
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "hyrun/link/node_link.hpp"

namespace hyrun::test_support {

/// One turn of a loop over `links`: polls their sockets for `timeout_ms(earliest wake_by())`
/// milliseconds, hands each ready one to its link, then ticks them all (silence, deadlines).
inline void turn(const std::vector<NodeLink*>& links,
                 const std::function<int(std::chrono::steady_clock::time_point)>& timeout_ms) {
  std::vector<pollfd> fds;
  for (auto* l : links) l->add_poll_fds(fds);
  auto until = std::chrono::steady_clock::time_point::max();
  for (auto* l : links) until = std::min(until, l->wake_by());
  ::poll(fds.data(), fds.size(), timeout_ms(until));
  for (const auto& p : fds)
    if (p.revents)
      for (auto* l : links)
        if (l->on_poll(p)) break;
  for (auto* l : links) l->on_tick();
}

/// Until `done` returns true (true) or `limit` passes (false).
inline bool pump(const std::vector<NodeLink*>& links, const std::function<bool()>& done,
                 std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    turn(links, [](std::chrono::steady_clock::time_point) { return 20; });
  }
  return true;
}

/// As hyrun's own loop (RankSupervisor::poll_once): sleeps until the earliest of the links'
/// wake_by() or a socket is ready, never less, so that a deadline a link does not announce is
/// met late. Until `done` returns true (true) or `limit` passes (false).
inline bool pump_as_hyrun(const std::vector<NodeLink*>& links, const std::function<bool()>& done,
                          std::chrono::milliseconds limit) {
  using Clock = std::chrono::steady_clock;
  const auto end = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() >= end) return false;
    turn(links, [&](Clock::time_point until) {
      const auto ms = std::chrono::ceil<std::chrono::milliseconds>(std::min(until, end) - Clock::now()).count();
      return static_cast<int>(std::max<long long>(ms, 0));
    });
  }
  return true;
}

}  // namespace hyrun::test_support
