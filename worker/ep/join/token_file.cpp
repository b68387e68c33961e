#include "token_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "hyrun/common/error.hpp"
#include "hyrun/common/job_token.hpp"
#include "hyrun/common/unique_fd.hpp"

namespace hyrun::ep::elastic {
namespace {
constexpr std::size_t kMaxToken = 256;

std::string read_all(int fd) {
  std::string text;
  char buffer[kMaxToken + 1];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > kMaxToken) break;
  }
  return text;
}
}  // namespace

void write_token_file(const std::string& path, const std::string& token) {
  const std::string temporary = fmt::format("{}.{}.{}", path, ::getpid(), make_job_token().substr(0, 8));
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) throw SystemError(fmt::format("writing the job's token file '{}'", temporary), errno);
  const std::string line = token + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
  const int e = errno;
  ::close(fd);
  if (!written || ::rename(temporary.c_str(), path.c_str()) != 0) {
    const int why = written ? errno : e;
    ::unlink(temporary.c_str());
    throw SystemError(fmt::format("writing the job's token file '{}'", path), why);
  }
}

std::string read_token_file(const std::string& path) {
  // O_NONBLOCK: a FIFO planted at the path would hold open() until a writer came; with it,
  // open() returns at once and fstat() below refuses what is not a regular file.
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd)
    throw UsageError(
        fmt::format("token file '{}': {}; the first launch (without --tcp-server) writes it, with the same "
                    "--plan and --token-file, or give the token in HYRUN_EP_TOKEN",
                    path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw SystemError(fmt::format("token file '{}'", path), errno);
  if (!S_ISREG(st.st_mode))
    throw UsageError(
        fmt::format("token file '{}' is not a regular file (a FIFO, socket or device is refused); remove "
                    "it and start the first launch again",
                    path));
  if (st.st_uid != ::geteuid())
    throw UsageError(
        fmt::format("token file '{}' belongs to user {}, not to this user ({})", path, st.st_uid, ::geteuid()));
  if ((st.st_mode & 077) != 0)
    throw UsageError(fmt::format("token file '{}' has mode {:o}: others can read or write it; it must be 0600", path,
                                 st.st_mode & 0777));
  std::string token = read_all(fd.get());
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  if (token.empty() || token.size() > kMaxToken ||
      !std::all_of(token.begin(), token.end(), [](char c) { return c > ' ' && c < 127; }))
    throw UsageError(fmt::format("token file '{}' does not hold a token (one line of at most {} printable characters)",
                                 path, kMaxToken));
  return token;
}

void remove_token_file(const std::string& path, const std::string& token) noexcept {
  try {
    if (read_token_file(path) == token) ::unlink(path.c_str());
  } catch (...) {
  }
}

}  // namespace hyrun::ep::elastic
