#include "hyrun/launcher/pmi_wire.hpp"

#include <fmt/format.h>

namespace hyrun {

std::optional<std::string_view> PmiRequest::field(std::string_view name) const {
  const auto it = fields.find(name);
  if (it == fields.end()) return std::nullopt;
  return std::string_view(it->second);
}

std::variant<PmiRequest, std::string> parse_pmi_line(std::string_view line) {
  if (line.size() > kPmiMaxLine) return fmt::format("a line of more than {} bytes", kPmiMaxLine);
  PmiRequest request;
  bool first = true;
  while (!line.empty()) {
    const std::size_t space = line.find(' ');
    const std::string_view word = line.substr(0, space);
    line = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
    if (word.empty()) continue;  // hydra's clients put two spaces in places
    const std::size_t equals = word.find('=');
    if (equals == std::string_view::npos || equals == 0)
      return fmt::format("'{}' is not key=value", word.substr(0, 64));
    const std::string_view key = word.substr(0, equals), value = word.substr(equals + 1);
    if (first) {
      if (key != "cmd" || value.empty()) return "it does not start with cmd=NAME";
      request.command = value;
      first = false;
    } else if (!request.fields.emplace(key, value).second) {
      return fmt::format("the field '{}' comes twice", key.substr(0, 64));
    }
  }
  if (first) return "an empty line";
  return request;
}

std::string format_pmi_reply(std::string_view command,
                             std::initializer_list<std::pair<std::string_view, std::string_view>> fields) {
  std::string line = fmt::format("cmd={}", command);
  for (const auto& [key, value] : fields) line += fmt::format(" {}={}", key, value);
  line += '\n';
  return line;
}

}  // namespace hyrun
