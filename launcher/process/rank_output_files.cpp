#include "hyrun/process/rank_output_files.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "hyrun/common/error.hpp"

namespace hyrun {

void RankOutputFiles::open(int rank) {
  if (!enabled() || files_.count({rank, 1})) return;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  const auto fail = [&](const std::string& path, int err) {
    return UsageError(fmt::format("--output-filename {}: cannot create {}: {}", dir_, path, std::strerror(err)));
  };
  if (ec) throw fail(dir_, ec.value());
  const std::string sub = fmt::format("rank.{}", rank);
  UniqueFd top(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!top) throw fail(dir_, errno);
  if (::mkdirat(top.get(), sub.c_str(), 0755) != 0 && errno != EEXIST) throw fail(dir_ + "/" + sub, errno);
  UniqueFd rank_dir(::openat(top.get(), sub.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!rank_dir) throw fail(dir_ + "/" + sub, errno);
  for (const auto& [destination, name] : {std::pair{1, "stdout"}, std::pair{2, "stderr"}})
    files_.emplace(std::pair{rank, destination}, open_regular(rank_dir.get(), fmt::format("{}/{}", sub, name), name));
}

UniqueFd RankOutputFiles::open_regular(int dir_fd, const std::string& relative, const char* name) const {
  const std::string path = fmt::format("{}/{}", dir_, relative);
  // O_NONBLOCK: open() of a FIFO planted there would wait for a reader, deaf to SIGTERM; this
  // way it returns at once (ENXIO without a reader) and fstat() refuses what is not a file.
  UniqueFd file(::openat(dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644));
  const auto refuse = [&](const char* kind) {
    return UsageError(
        fmt::format("--output-filename {}: {} is {}, not a regular file; remove it or give another "
                    "directory",
                    dir_, path, kind));
  };
  if (!file && errno == ENXIO) throw refuse("a FIFO");
  if (!file)
    throw UsageError(fmt::format("--output-filename {}: cannot create {}: {}", dir_, path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(file.get(), &st) != 0)
    throw UsageError(fmt::format("--output-filename {}: cannot check {}: {}", dir_, path, std::strerror(errno)));
  if (S_ISFIFO(st.st_mode)) throw refuse("a FIFO");
  if (!S_ISREG(st.st_mode)) throw refuse("a device or socket");
  // Writes to a regular file never block; clear it anyway so that the fd is as before.
  ::fcntl(file.get(), F_SETFL, ::fcntl(file.get(), F_GETFL) & ~O_NONBLOCK);
  return file;
}

void RankOutputFiles::write(int rank, int destination, std::string_view text) {
  const auto it = files_.find({rank, destination});
  if (it == files_.end() || !it->second) return;
  // A regular file: a plain write loop cannot stall here.
  while (!text.empty()) {
    const ssize_t n = ::write(it->second.get(), text.data(), text.size());
    if (n > 0) {
      text.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // ENOSPC, EDQUOT, EFBIG (ulimit -f; hyrun ignores SIGXFSZ), EIO: a file with a hole in
    // the middle would mislead more than one that stops, so this file ends here.
    const int err = n < 0 ? errno : ENOSPC;
    const char* stream = destination == 1 ? "stdout" : "stderr";
    const std::string path = fmt::format("{}/rank.{}/{}", dir_, rank, stream);
    spdlog::warn(
        "--output-filename: writing {} failed: {}; that file misses the rest of rank {}'s {} (hyrun's {} "
        "still gets it)",
        path, std::strerror(err), rank, stream, stream);
    lost_.push_back(fmt::format("{} ({})", path, std::strerror(err)));
    it->second.reset();
    return;
  }
}

}  // namespace hyrun
