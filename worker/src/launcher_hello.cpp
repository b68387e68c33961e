#include "launcher_hello.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string>

#include "hyrun/common/env_contract.hpp"

namespace hyrun::detail {

void say_hello_to_launcher() noexcept {
  static std::atomic<bool> said{false};
  if (said.exchange(true)) return;
  const char* text = std::getenv(env::kPublishFd);
  if (!text) return;
  int fd = -1;
  const char* end = text + std::strlen(text);
  if (const auto [ptr, ec] = std::from_chars(text, end, fd); ec != std::errc{} || ptr != end || fd < 0) return;
  // Only hyrun's pipe: a descendant of rank 0 inherits the variable, and its fd may be
  // anything once rank 0 has published and closed the pipe.
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return;
  try {
    const std::string line = format_hello_line();
    ssize_t n;
    do {
      n = ::write(fd, line.data(), line.size());  // a few bytes on a pipe: written whole or not at all
    } while (n < 0 && errno == EINTR);
  } catch (...) {
  }
}

namespace {
// At load, before main: a program that does long work before it creates its World still
// tells hyrun at once that it uses the library.
[[maybe_unused]] const bool said_at_load = (say_hello_to_launcher(), true);
}  // namespace

}  // namespace hyrun::detail
