#pragma once
// Who a process is: the host's boot (its boot id) and PID namespace, the pid, and the
// process's start time (a reused pid has another).
// - Ranks of one host watch each other's processes (DeathNotices): they reach each other
//   through shared memory, whose UCX endpoints report no death (UCX 1.13), and each hyrun
//   tells only its own ranks of deaths, so ranks of another launch on the host (staged
//   launches) are watched this way instead. Travels in the join and the address table.
// - A launcher's private directory names its owner, so that what a killed hyrun left is
//   removed by the next one (PrivateDirectory).
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "hyrun/common/unique_fd.hpp"

namespace hyrun {

struct ProcessIdentity {
  std::array<std::byte, 16> boot_id{};  ///< /proc/sys/kernel/random/boot_id
  uint64_t pid_namespace = 0;           ///< inode of /proc/self/ns/pid
  uint32_t pid = 0;                     ///< 0: unknown (nothing to watch)
  uint64_t start_ticks = 0;             ///< field 22 of /proc/PID/stat

  /// Encoded size: fixed.
  static constexpr std::size_t kBytes = 16 + 8 + 4 + 8;

  /// This process. Best effort: an unknown identity (pid 0) where /proc says nothing.
  static ProcessIdentity own();
  /// The start time of `pid` (0 when it does not exist or /proc cannot say).
  static uint64_t start_ticks_of(uint32_t pid);

  bool known() const { return pid != 0; }
  /// Both are known and run on one boot of one host, in one PID namespace: a pid of one
  /// names the same process for the other.
  bool same_host(const ProcessIdentity& other) const;
  /// A pidfd that becomes readable when the process ends; an empty fd when it has ended
  /// already (or its pid now names another process). Needs same_host(own()). Throws
  /// SystemError when it cannot tell (no pidfd: out of descriptors, a kernel before 5.3).
  UniqueFd watch() const;

  /// kBytes bytes; none for an unknown identity.
  std::vector<std::byte> encode() const;
  /// An empty span is an unknown identity; anything but kBytes throws Error.
  static ProcessIdentity decode(std::span<const std::byte> bytes);
  bool operator==(const ProcessIdentity&) const = default;
};

}  // namespace hyrun
