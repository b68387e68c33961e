#pragma once
// The PMI-1 wire protocol ("simple PMI") that MPICH and its derivatives speak over PMI_FD, as
// hydra and `srun --mpi=pmi2` serve it: one request a line, `cmd=NAME key=value ...`, words
// separated by spaces, no spaces or newlines inside a value. parse_pmi_line is strict: a
// malformed line gets a reason to say, never a guess.
#include <cstddef>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace hyrun {

/// The longest request line hyrun reads (PMI-1's largest, a put at the sizes get_maxes
/// announces, is about 1.4 KiB); a longer one is refused.
inline constexpr std::size_t kPmiMaxLine = 4096;
/// What get_maxes announces, and what a put may use.
inline constexpr std::size_t kPmiMaxKvsName = 256;
inline constexpr std::size_t kPmiMaxKey = 64;
inline constexpr std::size_t kPmiMaxValue = 1024;

/// One request: its command and its other fields.
struct PmiRequest {
  std::string command;
  std::map<std::string, std::string, std::less<>> fields;

  /// The field's value, or nullopt when the request has none.
  std::optional<std::string_view> field(std::string_view name) const;
};

/// A line (without its newline) as a request, or why it is not one.
std::variant<PmiRequest, std::string> parse_pmi_line(std::string_view line);

/// A reply line, newline included: `cmd=COMMAND` then each field in the order given.
std::string format_pmi_reply(std::string_view command,
                             std::initializer_list<std::pair<std::string_view, std::string_view>> fields);

}  // namespace hyrun
