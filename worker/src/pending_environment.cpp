#include "pending_environment.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <optional>
#include <string>

#include "directory_watch.hpp"
#include "hyrun/common/error.hpp"
#include "hyrun/common/hex.hpp"
#include "hyrun/common/pending_environment.hpp"
#include "hyrun/common/unique_fd.hpp"
#include "hyrun/common/user_directory.hpp"
#include "hyrun/common/whole_file.hpp"

namespace hyrun {
namespace {

// Only this user may have put the file there: the directory is this user's and no one
// else may write in it (hyrun made it with mode 0700).
void check_private(const std::string& dir, int rank) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    throw SystemError(fmt::format("rank {}: {}={}", rank, env::kRootPending, dir), errno);
  // The real uid: hyrun made the directory as the user who started the rank, setuid or not.
  if (const auto why = others_can_change(st, ::getuid()))
    throw Error(fmt::format("rank {}: {}={} is not a directory of this user that only it can write to: {}", rank,
                            env::kRootPending, dir, why->what));
}

// The file's content, or std::nullopt while it is not there.
std::optional<std::string> read_if_there(const std::string& path, int rank) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    if (errno == ENOENT) return std::nullopt;
    throw SystemError(fmt::format("rank {}: opening {}", rank, path), errno);
  }
  std::string content;
  char chunk[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw SystemError(fmt::format("rank {}: reading {}", rank, path), errno);
    if (n == 0) return content;
    content.append(chunk, static_cast<std::size_t>(n));
    if (content.size() > kMaxPendingEnvironmentBytes)
      throw Error(fmt::format("rank {}: {} holds over {} bytes: not a pending environment", rank, path,
                              kMaxPendingEnvironmentBytes));
  }
}

// Waits until `deadline` for the file `name` in the private directory `dir` and returns its
// content; `what` says what it brings ("rank 0's address") in the errors.
std::string await_file(const std::string& dir, const std::string& name, int rank, const std::string& what,
                       std::chrono::steady_clock::time_point deadline) {
  check_private(dir, rank);
  DirectoryWatch watch(dir, fmt::format("rank {}: {}={}", rank, env::kRootPending, dir));
  const std::string path = dir + "/" + name;
  std::optional<std::string> content;
  // Looked for after the watch exists, so that a file renamed in meanwhile is not missed.
  while (!(content = read_if_there(path, rank))) {
    const auto change = watch.wait(deadline);
    if (change == DirectoryWatch::Change::kTimedOut && !(content = read_if_there(path, rank)))
      throw TimeoutError(fmt::format("rank {}: {} did not come ({}/{}) within the bootstrap limit", rank, what,
                                     env::kRootPending, name));
    if (change == DirectoryWatch::Change::kDirectoryGone && !(content = read_if_there(path, rank)))
      throw Error(fmt::format("rank {}: {}={} was removed before {} came there (hyrun ended)", rank, env::kRootPending,
                              dir, what));
  }
  return std::move(*content);
}

constexpr std::string_view kLeaderPrefix = "hyrun-leader v1 ";

}  // namespace

RankEnvironment receive_pending_environment(const RankEnvironment& contract,
                                            std::chrono::steady_clock::time_point deadline) {
  if (contract.root_pending_dir.empty()) return contract;
  const std::string& dir = contract.root_pending_dir;
  const int rank = contract.rank;
  const std::string path = dir + "/" + pending_environment_file(rank);
  const auto content = await_file(dir, pending_environment_file(rank), rank, "rank 0's address from hyrun", deadline);
  const auto entries = parse_pending_environment(content);
  if (!entries) throw Error(fmt::format("rank {}: {} is not a pending environment from hyrun", rank, path));
  for (const auto& entry : *entries) {
    const auto eq = entry.find('=');
    if (::setenv(entry.substr(0, eq).c_str(), entry.c_str() + eq + 1, 1) != 0)
      throw SystemError(fmt::format("rank {}: setenv {}", rank, entry.substr(0, eq)), errno);
  }
  ::unsetenv(env::kRootPending);
  return RankEnvironment::from_environment();
}

void put_node_leader_address(const std::string& dir, int rank, std::span<const std::byte> address) {
  try {
    put_whole_file(dir, kNodeLeaderFile, fmt::format("{}{} {}\n", kLeaderPrefix, rank, to_hex(address)));
  } catch (const SystemError& e) {
    throw Error(fmt::format("rank {}: putting its address for its node's ranks: {}", rank, e.what()));
  }
}

std::vector<std::byte> await_node_leader_address(const std::string& dir, int rank, int leader,
                                                 std::chrono::steady_clock::time_point deadline) {
  const auto what = fmt::format("the address of rank {}, which carries its node's joins", leader);
  const std::string content = await_file(dir, kNodeLeaderFile, rank, what, deadline);
  const std::string expected = fmt::format("{}{} ", kLeaderPrefix, leader);
  if (!content.starts_with(expected) || !content.ends_with('\n'))
    throw Error(fmt::format("rank {}: {}/{} is not rank {}'s address (expected \"{}<hex>\")", rank, dir,
                            kNodeLeaderFile, leader, expected));
  return from_hex(std::string_view(content).substr(expected.size(), content.size() - expected.size() - 1),
                  fmt::format("{}/{}", dir, kNodeLeaderFile));
}

}  // namespace hyrun
