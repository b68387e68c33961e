#include "hyrun/binding/child_binding.hpp"

#include <linux/mempolicy.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hyrun::binding {
namespace {

// Appends into a caller buffer without allocating; always NUL-terminated.
class MessageWriter {
 public:
  MessageWriter(char* buf, std::size_t len) noexcept : buf_(buf), len_(len) {
    if (buf_ && len_) buf_[0] = '\0';
  }
  MessageWriter& text(const char* s) noexcept {
    while (*s) put(*s++);
    return *this;
  }
  MessageWriter& number(unsigned long v) noexcept {
    char digits[24];
    int n = 0;
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v);
    while (n) put(digits[--n]);
    return *this;
  }
  // A bit test per index as "0-3,8"; "(none)" when empty.
  template <typename Test>
  MessageWriter& list(std::size_t size, Test is_set) noexcept {
    bool first = true;
    for (std::size_t i = 0; i < size;) {
      if (!is_set(i)) {
        ++i;
        continue;
      }
      std::size_t j = i;
      while (j + 1 < size && is_set(j + 1)) ++j;
      if (!first) put(',');
      first = false;
      number(i);
      if (j > i) put('-').number(j);
      i = j + 1;
    }
    if (first) text("(none)");
    return *this;
  }
  bool empty() const noexcept { return pos_ == 0; }

 private:
  MessageWriter& put(char c) noexcept {
    if (buf_ && pos_ + 1 < len_) {
      buf_[pos_++] = c;
      buf_[pos_] = '\0';
    }
    return *this;
  }
  char* buf_;
  std::size_t len_;
  std::size_t pos_ = 0;
};

bool node_set(const unsigned long* mask, std::size_t i) noexcept {
  constexpr std::size_t bits = 8 * sizeof(unsigned long);
  return (mask[i / bits] >> (i % bits)) & 1UL;
}

}  // namespace

int apply_child_binding(const ChildBinding& b, char* msg, std::size_t msg_len) noexcept {
  const int saved_errno = errno;
  MessageWriter out(msg, msg_len);
  int rc = 0;
  const auto fail = [&](int code) { rc = rc ? rc : code; };

  if (b.bind_cpus) {
    const auto expected = [&](std::size_t i) { return CPU_ISSET(i, &b.cpus) != 0; };
    if (sched_setaffinity(0, sizeof(cpu_set_t), &b.cpus) != 0) {
      const int e = errno;
      out.text("CPU binding to ").list(CPU_SETSIZE, expected).text(" failed: errno ").number(static_cast<unsigned>(e));
      fail(e);
    } else {
      cpu_set_t got;
      CPU_ZERO(&got);
      if (sched_getaffinity(0, sizeof(cpu_set_t), &got) != 0) {
        const int e = errno;
        out.text("CPU binding read back failed: errno ").number(static_cast<unsigned>(e));
        fail(e);
      } else if (!CPU_EQUAL(&got, &b.cpus)) {
        // The kernel silently drops CPUs outside the cgroup cpuset: the read-back catches it.
        out.text("CPU binding read back ")
            .list(CPU_SETSIZE, [&](std::size_t i) { return CPU_ISSET(i, &got) != 0; })
            .text(", expected ")
            .list(CPU_SETSIZE, expected);
        fail(EIO);
      }
    }
  }

  if (b.bind_memory) {
    const auto expected = [&](std::size_t i) { return node_set(b.nodes, i); };
    // The kernel reads maxnode-1 bits, hence the +1.
    if (syscall(SYS_set_mempolicy, MPOL_BIND, b.nodes, ChildBinding::kMaxNumaNodes + 1) != 0) {
      const int e = errno;
      if (!out.empty()) out.text("; ");
      out.text("memory binding to NUMA ")
          .list(ChildBinding::kMaxNumaNodes, expected)
          .text(" failed: errno ")
          .number(static_cast<unsigned>(e));
      fail(e);
    } else {
      int mode = -1;
      unsigned long got[ChildBinding::kNodeWords];
      std::memset(got, 0, sizeof got);
      if (syscall(SYS_get_mempolicy, &mode, got, ChildBinding::kMaxNumaNodes, nullptr, 0UL) != 0) {
        const int e = errno;
        if (!out.empty()) out.text("; ");
        out.text("memory binding read back failed: errno ").number(static_cast<unsigned>(e));
        fail(e);
      } else if (mode != MPOL_BIND || std::memcmp(got, b.nodes, sizeof got) != 0) {
        if (!out.empty()) out.text("; ");
        out.text("memory binding read back mode ")
            .number(static_cast<unsigned>(mode))
            .text(" nodes ")
            .list(ChildBinding::kMaxNumaNodes, [&](std::size_t i) { return node_set(got, i); })
            .text(", expected MPOL_BIND nodes ")
            .list(ChildBinding::kMaxNumaNodes, expected);
        fail(EIO);
      }
    }
  }
  errno = saved_errno;
  return b.warn_only ? 0 : rc;
}

}  // namespace hyrun::binding
