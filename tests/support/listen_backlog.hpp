#pragma once
// What the kernel says of a listening TCP port, for the tests of the servers' backlogs.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <optional>

namespace hyrun::test_support {

/// The kernel's longest listen backlog (net.core.somaxconn), or 0 when it cannot be read.
inline int kernel_somaxconn() {
  int somaxconn = 0;
  std::ifstream("/proc/sys/net/core/somaxconn") >> somaxconn;
  return somaxconn;
}

/// The backlog of the TCP socket listening on `port`, as `ss` (iproute2) reports it;
/// std::nullopt when ss is missing or lists nothing.
inline std::optional<int> listen_backlog(int port) {
  const std::string command = fmt::format("ss -ltnH 'sport = :{}' 2>/dev/null", port);
  FILE* ss = ::popen(command.c_str(), "r");
  if (ss == nullptr) return std::nullopt;
  char state[32] = {}, line[512] = {};
  int queued = -1, backlog = -1;
  const bool got = std::fgets(line, sizeof line, ss) != nullptr;
  ::pclose(ss);
  if (!got || std::sscanf(line, "%31s %d %d", state, &queued, &backlog) != 3) return std::nullopt;
  return backlog;
}

}  // namespace hyrun::test_support
