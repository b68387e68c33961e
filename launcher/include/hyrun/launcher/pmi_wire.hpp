#pragma once
// The PMI wire protocols that MPICH and its derivatives speak over PMI_FD, as hydra and
// `srun --mpi=pmi2` serve them. PMI-1 ("simple PMI"): one request a line, `cmd=NAME key=value
// ...`, words separated by spaces, no spaces or newlines inside a value. PMI-2, after a PMI-1
// `cmd=init pmi_version=2`: each command is a 6-byte decimal length, left-aligned and padded
// with spaces, then `cmd=NAME;key=value;...;`, a ';' inside a value doubled. The parsers are
// strict: a malformed request gets a reason to say, never a guess.
#include <cstddef>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

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

/// PMI-2: the length field's bytes, and the longest command (its client's own bound, 64 KiB).
inline constexpr std::size_t kPmi2LengthField = 6;
inline constexpr std::size_t kPmi2MaxCommand = 64 * 1024;
/// PMI-2's longest key and value (PMI2_MAX_KEYLEN, PMI2_MAX_VALLEN).
inline constexpr std::size_t kPmi2MaxKey = 64;
inline constexpr std::size_t kPmi2MaxValue = 1024;

/// A line (without its newline) as a request, or why it is not one.
std::variant<PmiRequest, std::string> parse_pmi_line(std::string_view line);

/// A reply line, newline included: `cmd=COMMAND` then each field in the order given.
std::string format_pmi_reply(std::string_view command,
                             std::initializer_list<std::pair<std::string_view, std::string_view>> fields);

/// PMI-2: the length that the first kPmi2LengthField bytes of `head` announce, or why they
/// are not a length (digits, then spaces only; 1 to kPmi2MaxCommand).
std::variant<std::size_t, std::string> parse_pmi2_length(std::string_view head);

/// PMI-2: a command's body (after its length field) as a request, or why it is not one.
std::variant<PmiRequest, std::string> parse_pmi2_command(std::string_view body);

/// PMI-2: a reply, length field included: `cmd=COMMAND;` then each field in the order given,
/// each value's ';' doubled.
std::string format_pmi2_reply(std::string_view command,
                              const std::vector<std::pair<std::string_view, std::string_view>>& fields);

}  // namespace hyrun
