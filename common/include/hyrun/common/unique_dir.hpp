#pragma once
// Owns one directory stream (opendir); closes it exactly once, as UniqueFd does a descriptor.
// Header-only, beside UniqueFd: the launcher's libraries (binding, process, PMIx) share only
// hyrun_common.
#include <dirent.h>

#include <memory>
#include <string>

namespace hyrun {

struct DirectoryCloser {
  void operator()(DIR* dir) const noexcept { ::closedir(dir); }
};
/// Empty when opendir failed (errno says why).
using UniqueDir = std::unique_ptr<DIR, DirectoryCloser>;

inline UniqueDir open_directory(const std::string& path) { return UniqueDir(::opendir(path.c_str())); }

}  // namespace hyrun
