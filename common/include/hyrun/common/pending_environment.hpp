#pragma once
// The rest of a rank's environment, for a rank that hyrun started before the job's
// bootstrap values were known (docs/architecture.md, "Ranks started before the exchange").
// Such a rank has HYRUN_ROOT_PENDING=DIR, a directory only its user can enter; when the
// values are known hyrun puts there, for each such rank, the file `rank.<global rank>`
// (written whole, then renamed into place) holding the variables the rank would have had:
//   "hyrun-environment v1" NUL "NAME=value" NUL "NAME=value" ...
// (rank 0's address; on the other nodes also the job's token and MASTER_ADDR/MASTER_PORT).
// NUL separators: an environment value can hold anything else. A file, not a message on the
// control socket: a wrapper that closes inherited descriptors must not cut the rank off.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hyrun {

/// The most a pending-environment file may hold.
inline constexpr std::size_t kMaxPendingEnvironmentBytes = 64 * 1024;

/// The name of global rank `rank`'s file in the pending directory: "rank.<rank>".
std::string pending_environment_file(int rank);

/// The file's content for `entries` ("NAME=value" each).
std::string format_pending_environment(const std::vector<std::string>& entries);
/// Its entries, or std::nullopt if `content` is not one: wrong prefix, an entry without
/// '=' or with a name that is not [A-Za-z_][A-Za-z0-9_]*, or over kMaxPendingEnvironmentBytes.
std::optional<std::vector<std::string>> parse_pending_environment(std::string_view content);

}  // namespace hyrun
