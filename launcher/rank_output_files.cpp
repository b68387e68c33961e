#include "hyrun/launcher/rank_output_files.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>

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
  for (const auto& [destination, name] : {std::pair{1, "stdout"}, std::pair{2, "stderr"}}) {
    UniqueFd file(::openat(rank_dir.get(), name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!file) throw fail(fmt::format("{}/{}/{}", dir_, sub, name), errno);
    files_.emplace(std::pair{rank, destination}, std::move(file));
  }
}

int RankOutputFiles::fd(int rank, int destination) const {
  const auto it = files_.find({rank, destination});
  return it == files_.end() ? -1 : it->second.get();
}

}  // namespace hyrun
