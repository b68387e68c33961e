#pragma once
// The one rule for a directory whose names no other user may change: the directories where
// hyrun keeps what decides what it or a rank does next (the topology cache, the pending
// environment, the home of its private directories, ep-bench's report directory). Such a
// directory is owned by the user, and no one else can create, rename or remove names in it:
// its mode lets neither its group nor other users write, or, where the caller accepts it, it
// has the sticky bit (others may add names of their own but not touch the user's).
#include <sys/stat.h>
#include <sys/types.h>

#include <optional>
#include <string>

#include "hyrun/common/unique_fd.hpp"

namespace hyrun {

/// Whether a directory others can write in is accepted when it has the sticky bit.
enum class StickyBit { kNotEnough, kEnough };

/// Why a directory breaks the rule, in words that follow "<path>: ".
struct NotOnlyOurs {
  enum class Reason { kNotADirectory, kOtherOwner, kOthersWrite };
  Reason reason;
  std::string what;  ///< "it is owned by uid 65534, not by you (uid 1000)", ...
};

/// Checks the directory `st` describes for `owner` (the effective uid, unless a caller means
/// the real one); std::nullopt when it holds.
std::optional<NotOnlyOurs> others_can_change(const struct stat& st, uid_t owner,
                                             StickyBit sticky = StickyBit::kNotEnough);

/// A directory of this user's, open, that the rule was checked on.
struct UserDirectory {
  UniqueFd fd;           ///< O_RDONLY | O_DIRECTORY
  bool created = false;  ///< this call made it
};

/// Opens `path`, making it (mode 0700) when it is missing, never through a symbolic link, and
/// checks the rule (StickyBit::kNotEnough, the effective uid) on the descriptor it returns.
/// Throws SystemError ("<path>: cannot create it" with errno ENOENT when a parent is missing,
/// ...) or Error ("<path>: it is owned by uid ...") naming the path and what is wrong.
UserDirectory open_user_directory(const std::string& path);

}  // namespace hyrun
