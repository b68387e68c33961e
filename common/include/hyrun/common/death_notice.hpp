#pragma once
// The messages by which hyrun tells a rank that other ranks died, on the rank's control
// channel (HYRUN_CONTROL_FD), and the rank's request for them:
//   rank -> hyrun  "handles-deaths v1"   this process handles peers' deaths (an elastic
//                                        program); hyrun then tells it of every death it
//                                        learns of, and a lost node no longer ends the job
//                                        when every process of this node said so
//   hyrun -> rank  "rank-died v1 R"      the current process of global rank R has ended
// The rank's side reads the channel in one place (the worker library's DeathNotices).
#include <optional>
#include <string>
#include <string_view>

namespace hyrun {

inline constexpr std::string_view kHandlesDeathsMessage = "handles-deaths v1";

/// "rank-died v1 R"
std::string format_rank_died(int rank);
/// R, or std::nullopt if `message` is not exactly such a message with 0 <= R < world_size.
std::optional<int> parse_rank_died(std::string_view message, int world_size);

}  // namespace hyrun
