#pragma once
// The message rank 0 sends on its control channel (HYRUN_CONTROL_FD) to have its hyrun start
// the first (or next) process of a rank of the same launch now: elastic programs start a
// rank when the phase that needs it begins, not at launch. The new process joins late
// (it is outside HYRUN_START_RANKS, or a later incarnation).
#include <optional>
#include <string>
#include <string_view>

namespace hyrun {

/// "start-rank v1 rank=R"
std::string format_start_rank_request(int rank);
/// The rank asked for, or std::nullopt if `message` is not exactly such a message (R >= 1).
std::optional<int> parse_start_rank_request(std::string_view message);

}  // namespace hyrun
