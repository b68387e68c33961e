#pragma once
// The binding of one rank as plain data, applied in the forked child before exec.
#include <sched.h>

#include <cstddef>

namespace hyrun::binding {

/// Fixed-size masks, so the child needs no allocation. Nodes beyond kMaxNumaNodes and CPUs
/// beyond CPU_SETSIZE (1024) are refused when the plan is computed.
struct ChildBinding {
  static constexpr std::size_t kMaxNumaNodes = 1024;
  static constexpr std::size_t kNodeWords = kMaxNumaNodes / (8 * sizeof(unsigned long));

  int local_rank = 0;
  bool bind_cpus = false;
  cpu_set_t cpus{};  ///< sched_setaffinity mask (OS indexes)
  bool bind_memory = false;
  unsigned long nodes[kNodeWords]{};  ///< set_mempolicy(MPOL_BIND) node mask (OS indexes)
  bool warn_only = false;             ///< a failure or mismatch returns 0 with a message
};

/// Applies `binding` to the calling process: sched_setaffinity and set_mempolicy(MPOL_BIND),
/// then reads both back (sched_getaffinity, get_mempolicy) and compares.
/// Async-signal-safe: no allocation, no locks, no hwloc, no exceptions, no stdio; safe between
/// fork and exec. Returns 0 on success; else the failing call's errno, or EIO for a read-back
/// mismatch, and writes one NUL-terminated line into `msg` (truncated to msg_len), e.g.
/// "CPU binding read back 0-3, expected 0-7". With warn_only it returns 0 and leaves the
/// message for the caller to log; msg is "" when all went well.
int apply_child_binding(const ChildBinding& binding, char* msg, std::size_t msg_len) noexcept;

}  // namespace hyrun::binding
