#include "hyrun/common/process_identity.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "hyrun/common/error.hpp"

namespace hyrun {
namespace {

std::array<std::byte, 16> read_boot_id() {
  std::array<std::byte, 16> id{};
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string text;
  if (!std::getline(in, text)) return id;
  std::size_t out = 0;
  for (std::size_t i = 0; i + 1 < text.size() && out < id.size();) {
    if (text[i] == '-') {
      ++i;
      continue;
    }
    unsigned value = 0;
    if (std::sscanf(text.c_str() + i, "%2x", &value) != 1) return {};
    id[out++] = static_cast<std::byte>(value);
    i += 2;
  }
  return out == id.size() ? id : std::array<std::byte, 16>{};
}

}  // namespace

uint64_t ProcessIdentity::start_ticks_of(uint32_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  if (!std::getline(in, stat)) return 0;
  // "pid (comm) state ppid ...": comm may hold anything, so count from its closing ')'.
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i < 22 && fields >> field; ++i) {
  }
  uint64_t start = 0;
  return fields >> start ? start : 0;
}

ProcessIdentity ProcessIdentity::own() {
  const auto read = [] {
    ProcessIdentity id;
    struct stat ns {};
    id.boot_id = read_boot_id();
    if (::stat("/proc/self/ns/pid", &ns) != 0 || id.boot_id == std::array<std::byte, 16>{}) return id;
    id.pid_namespace = ns.st_ino;
    id.pid = static_cast<uint32_t>(::getpid());
    id.start_ticks = start_ticks_of(id.pid);
    if (id.start_ticks == 0) id.pid = 0;
    return id;
  };
  static const ProcessIdentity first = read();
  // A forked child is another process (its pid and start time): read again there.
  return first.pid == static_cast<uint32_t>(::getpid()) ? first : read();
}

bool ProcessIdentity::same_host(const ProcessIdentity& other) const {
  return known() && other.known() && boot_id == other.boot_id && pid_namespace == other.pid_namespace;
}

UniqueFd ProcessIdentity::watch() const {
  UniqueFd fd(static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0)));
  if (!fd) {
    if (errno == ESRCH) return {};                                           // gone (and reaped)
    throw SystemError(fmt::format("pidfd_open of process {}", pid), errno);  // e.g. EMFILE, ENOSYS
  }
  // Checked after the pidfd is open: it holds whatever process had the pid then, so another
  // start time means that ours had ended before. Where /proc cannot say (0), the pidfd is
  // kept: a watch of the wrong process misses a death, a wrong "ended" would invent one.
  const uint64_t now = start_ticks_of(pid);
  if (now != 0 && now != start_ticks) return {};
  return fd;
}

std::vector<std::byte> ProcessIdentity::encode() const {
  if (!known()) return {};
  std::vector<std::byte> out(kBytes);
  std::memcpy(out.data(), boot_id.data(), 16);
  std::memcpy(out.data() + 16, &pid_namespace, 8);
  std::memcpy(out.data() + 24, &pid, 4);
  std::memcpy(out.data() + 28, &start_ticks, 8);
  return out;
}

ProcessIdentity ProcessIdentity::decode(std::span<const std::byte> bytes) {
  ProcessIdentity id;
  if (bytes.empty()) return id;
  if (bytes.size() != kBytes)
    throw Error(fmt::format("a process identity of {} bytes, expected {}", bytes.size(), kBytes));
  std::memcpy(id.boot_id.data(), bytes.data(), 16);
  std::memcpy(&id.pid_namespace, bytes.data() + 16, 8);
  std::memcpy(&id.pid, bytes.data() + 24, 4);
  std::memcpy(&id.start_ticks, bytes.data() + 28, 8);
  return id;
}

}  // namespace hyrun
