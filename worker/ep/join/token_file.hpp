#pragma once
// The job token of a staged elastic launch, shared through a file that only its owner can
// read, in a directory every launch of the job sees (e.g. the shared output directory
// where CloudAI writes the plan). Later launches prove that they know it (join_protocol).
#include <string>

namespace hyrun::ep::elastic {

/// Writes `token` into `path` atomically (a new 0600 file under a temporary name, renamed
/// into place: never written through a planted symlink). Throws SystemError naming the path.
void write_token_file(const std::string& path, const std::string& token);
/// Reads the token back. Throws UsageError naming the path when it is missing, not a
/// regular file, not owned by this user, readable or writable by others, or malformed.
std::string read_token_file(const std::string& path);
/// Removes the file if it still holds `token` (a later run may have replaced it).
void remove_token_file(const std::string& path, const std::string& token) noexcept;

}  // namespace hyrun::ep::elastic
