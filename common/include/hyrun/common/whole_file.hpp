#pragma once
// A file that a reader in another process takes only whole: written under a hidden name in
// the same directory, then renamed into place (rename is atomic within a file system), so a
// reader that watches the directory never sees it half-written. hyrun's pending environment
// files and a node leader's address file (pending_environment.hpp) are put so.
#include <string>
#include <string_view>

namespace hyrun {

/// Puts `content` in `dir`/`name` (mode 0600, through `dir`/.`name`.partial; a link at either
/// path is not followed). Throws SystemError naming the file; leaves no partial file then.
void put_whole_file(const std::string& dir, const std::string& name, std::string_view content);

}  // namespace hyrun
