#include "hyrun/common/user_directory.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>

#include "hyrun/common/error.hpp"

namespace hyrun {

std::optional<NotOnlyOurs> others_can_change(const struct stat& st, uid_t owner, StickyBit sticky) {
  using Reason = NotOnlyOurs::Reason;
  if (!S_ISDIR(st.st_mode)) return NotOnlyOurs{Reason::kNotADirectory, "it is not a directory"};
  if (st.st_uid != owner)
    return NotOnlyOurs{Reason::kOtherOwner,
                       fmt::format("it is owned by uid {}, not by you (uid {})", st.st_uid, owner)};
  const bool group = (st.st_mode & S_IWGRP) != 0, others = (st.st_mode & S_IWOTH) != 0;
  if (!group && !others) return std::nullopt;
  if (sticky == StickyBit::kEnough && (st.st_mode & S_ISVTX) != 0) return std::nullopt;
  return NotOnlyOurs{Reason::kOthersWrite,
                     fmt::format("{} can write in it (mode {:04o}){}",
                                 group && others ? "its group and all users"
                                 : group         ? "its group"
                                                 : "all users",
                                 st.st_mode & 07777, sticky == StickyBit::kEnough ? " and it has no sticky bit" : "")};
}

UserDirectory open_user_directory(const std::string& path) {
  UserDirectory dir;
  dir.fd.reset(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir.fd && errno == ENOENT) {
    if (::mkdir(path.c_str(), 0700) == 0)
      dir.created = true;
    else if (errno != EEXIST)  // EEXIST: another process made it meanwhile; checked below as any other
      throw SystemError(fmt::format("{}: cannot create it", path), errno);
    dir.fd.reset(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  }
  if (!dir.fd && (errno == ELOOP || errno == ENOTDIR)) {
    struct stat link {};
    const bool is_link = ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode);
    throw Error(fmt::format("{}: it is {}", path, is_link ? "a symbolic link, not a directory" : "not a directory"));
  }
  if (!dir.fd) throw SystemError(fmt::format("{}: cannot open it", path), errno);
  struct stat st {};
  if (::fstat(dir.fd.get(), &st) != 0) throw SystemError(fmt::format("{}: cannot check it", path), errno);
  if (const auto why = others_can_change(st, ::geteuid())) throw Error(fmt::format("{}: {}", path, why->what));
  return dir;
}

}  // namespace hyrun
