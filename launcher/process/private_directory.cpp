#include "hyrun/process/private_directory.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "hyrun/common/error.hpp"
#include "hyrun/common/process_identity.hpp"
#include "hyrun/common/unique_dir.hpp"
#include "hyrun/common/unique_fd.hpp"
#include "hyrun/common/user_directory.hpp"

namespace hyrun {
namespace {

// The owner named in `dir`; none when the file is missing, unreadable or not an identity
// (a directory being made right now has none yet: it is kept).
std::optional<ProcessIdentity> read_owner(const std::string& dir) {
  const UniqueFd fd(::open((dir + "/" + PrivateDirectory::kOwnerFile).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return std::nullopt;
  std::array<std::byte, ProcessIdentity::kBytes + 1> bytes{};
  const ssize_t n = ::read(fd.get(), bytes.data(), bytes.size());
  if (n != static_cast<ssize_t>(ProcessIdentity::kBytes)) return std::nullopt;
  try {
    return ProcessIdentity::decode(std::span(bytes.data(), ProcessIdentity::kBytes));
  } catch (const Error&) {
    return std::nullopt;
  }
}

void write_owner(const std::string& dir) {
  const auto bytes = ProcessIdentity::own().encode();
  if (bytes.empty()) return;  // /proc says nothing: the directory is never reclaimed
  const std::string path = dir + "/" + PrivateDirectory::kOwnerFile;
  const UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd || ::write(fd.get(), bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size()))
    spdlog::debug("could not name the owner of {} (errno {}): a kill of this process would leave it", dir, errno);
}

// Directories a killed process of this user left (a SIGKILLed hyrun cannot remove its own):
// those of `parent` whose names `ours` accepts. Best effort: whatever cannot be judged is kept.
template <typename Name>
void remove_abandoned(const std::string& parent, Name ours) {
  const ProcessIdentity self = ProcessIdentity::own();
  if (!self.known()) return;
  // readdir, not std::filesystem: a path object for each entry cost 2.5 times the listing itself
  // when the parent was /tmp (100 000 entries: 58-69 ms against 22-29 ms).
  const UniqueDir listing = open_directory(parent);
  if (!listing) return;
  while (const dirent* entry = ::readdir(listing.get())) {
    const std::string_view name(entry->d_name);
    if (!ours(name)) continue;
    const std::string path = parent + "/" + std::string(name);
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) continue;
    const auto owner = read_owner(path);
    // Another host (a shared filesystem) or PID namespace: its pids say nothing here.
    if (!owner || !owner->same_host(self)) continue;
    if (ProcessIdentity::start_ticks_of(owner->pid) == owner->start_ticks) continue;  // alive
    std::error_code removed;
    std::filesystem::remove_all(path, removed);
    if (removed)
      spdlog::debug("could not remove {}, left by pid {}: {}", path, owner->pid, removed.message());
    else
      spdlog::debug("removed {}: its owner (pid {}) was killed before it could", path, owner->pid);
  }
}

// `<prefix>-XXXXXX`, as mkdtemp names them.
auto named_by(const std::string& prefix) {
  return [start = prefix + "-"](std::string_view name) {
    return name.size() == start.size() + 6 && name.starts_with(start);
  };
}

// A process makes several private directories in one parent: one warning for each problem.
void warn_once(const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> warned;
  const std::lock_guard lock(mutex);
  if (warned.insert(message).second) spdlog::warn("{}", message);
}

// The directory under `parent` that holds this user's private directories, so that finding what
// a killed hyrun left reads only it, never the whole of `parent` (often /tmp: 100 000 entries
// cost a launch 35 ms). std::nullopt when it cannot be used: then they are made in `parent`.
std::optional<std::string> home_under(const std::string& parent) {
  std::string home = fmt::format("{}/{}{}", parent, PrivateDirectory::kHomePrefix, ::geteuid());
  try {
    if (open_user_directory(home).created) {
      // Once, by the launch that makes the home: what hyrun before it left in `parent` itself.
      remove_abandoned(parent, [](std::string_view name) {
        return name.starts_with("hyrun-") && name.size() > 13 && name[name.size() - 7] == '-';
      });
    }
    return home;
  } catch (const SystemError& e) {
    if (e.errnum() == ENOENT) return std::nullopt;  // no parent: creating in it names the error
    warn_once(fmt::format("{}; this user's private directories are made in {} itself", e.what(), parent));
  } catch (const Error& e) {
    // Anyone could have made it first; it would then be theirs to fill or to empty.
    warn_once(
        fmt::format("{}; this user's private directories are made in {} itself, which each launch then reads whole "
                    "(once it is removed, hyrun makes it again)",
                    e.what(), parent));
  }
  return std::nullopt;
}

}  // namespace

PrivateDirectory PrivateDirectory::create(const std::string& parent, const std::string& prefix) {
  const std::string where = home_under(parent).value_or(parent);
  remove_abandoned(where, named_by(prefix));
  const std::string pattern = where + "/" + prefix + "-XXXXXX";
  std::string templ = pattern;  // mkdtemp writes into it, even when it fails
  if (::mkdtemp(templ.data()) == nullptr) throw SystemError("cannot create a private directory from " + pattern, errno);
  write_owner(templ);
  return PrivateDirectory(std::move(templ));
}

std::string PrivateDirectory::temporary_root() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
}

PrivateDirectory::~PrivateDirectory() { remove(); }

PrivateDirectory::PrivateDirectory(PrivateDirectory&& other) noexcept : path_(std::exchange(other.path_, {})) {}

PrivateDirectory& PrivateDirectory::operator=(PrivateDirectory&& other) noexcept {
  if (this != &other) {
    remove();
    path_ = std::exchange(other.path_, {});
  }
  return *this;
}

void PrivateDirectory::remove() noexcept {
  if (path_.empty()) return;
  // Its owner file last: a removal cut short (hyrun killed in the middle of it) leaves a
  // directory that still names its owner, which the next hyrun then reclaims; one without it
  // would be kept for ever (WhatCannotBeJudgedIsKept).
  std::error_code ec;
  std::vector<std::filesystem::path> entries;
  for (auto it = std::filesystem::directory_iterator(path_, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec))
    if (it->path().filename() != kOwnerFile) entries.push_back(it->path());
  for (const auto& entry : entries) {
    std::error_code removed;
    std::filesystem::remove_all(entry, removed);
  }
  std::filesystem::remove_all(path_, ec);
  if (ec) spdlog::warn("could not remove {}: {}", path_, ec.message());
  path_.clear();
}

}  // namespace hyrun
