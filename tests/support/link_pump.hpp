#pragma once
// Runs node links' loops in a test, as hyrun's supervisor loop would: polls every link's
// sockets, hands each ready one to its link, then ticks them all (silence, deadlines).
#include <poll.h>

#include <chrono>
#include <functional>
#include <vector>

#include "hyrun/link/node_link.hpp"

namespace hyrun::test_support {

/// Until `done` returns true (true) or `limit` passes (false).
inline bool pump(const std::vector<NodeLink*>& links, const std::function<bool()>& done,
                 std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::vector<pollfd> fds;
    for (auto* l : links) l->add_poll_fds(fds);
    ::poll(fds.data(), fds.size(), 20);
    for (const auto& p : fds)
      if (p.revents)
        for (auto* l : links)
          if (l->on_poll(p)) break;
    for (auto* l : links) l->on_tick();
  }
  return true;
}

}  // namespace hyrun::test_support
