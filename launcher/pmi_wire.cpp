#include "hyrun/launcher/pmi_wire.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

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

std::variant<std::size_t, std::string> parse_pmi2_length(std::string_view head) {
  head = head.substr(0, kPmi2LengthField);
  std::size_t length = 0, digits = 0;
  while (digits < head.size() && std::isdigit(static_cast<unsigned char>(head[digits])))
    length = length * 10 + static_cast<std::size_t>(head[digits++] - '0');
  const bool spaces_after = head.find_first_not_of(' ', digits) == std::string_view::npos;
  if (digits == 0 || !spaces_after) return fmt::format("'{}' is not a PMI-2 length (digits, then spaces)", head);
  if (length == 0 || length > kPmi2MaxCommand)
    return fmt::format("a PMI-2 command of {} bytes (1 to {} are allowed)", length, kPmi2MaxCommand);
  return length;
}

std::variant<PmiRequest, std::string> parse_pmi2_command(std::string_view body) {
  if (body.empty() || body.back() != ';') return "it does not end with ';'";
  PmiRequest request;
  bool first = true;
  while (!body.empty()) {
    const std::size_t equals = body.find('=');
    const std::size_t semicolon = body.find(';');
    if (equals == std::string_view::npos || equals == 0 || semicolon < equals)
      return fmt::format("'{}' is not key=value;", body.substr(0, std::min<std::size_t>(semicolon, 64)));
    const std::string_view key = body.substr(0, equals);
    if (key.size() > kPmi2MaxKey) return fmt::format("a key of more than {} bytes", kPmi2MaxKey);
    std::string value;  // up to the first single ';', each ";;" one ';'
    std::size_t at = equals + 1;
    for (;; ++at) {
      if (at >= body.size()) return "a value without its closing ';'";
      if (body[at] != ';') {
        value += body[at];
      } else if (at + 1 < body.size() && body[at + 1] == ';') {
        value += ';';
        ++at;
      } else {
        break;
      }
    }
    if (value.size() > kPmi2MaxValue) return fmt::format("a value of more than {} bytes", kPmi2MaxValue);
    body = body.substr(at + 1);
    if (first) {
      if (key != "cmd" || value.empty()) return "it does not start with cmd=NAME;";
      request.command = std::move(value);
      first = false;
    } else if (!request.fields.emplace(key, std::move(value)).second) {
      return fmt::format("the field '{}' comes twice", key.substr(0, 64));
    }
  }
  return request;
}

std::string format_pmi2_reply(std::string_view command,
                              const std::vector<std::pair<std::string_view, std::string_view>>& fields) {
  std::string body = fmt::format("cmd={};", command);
  for (const auto& [key, value] : fields) {
    body += key;
    body += '=';
    for (const char c : value) {
      if (c == ';') body += ';';
      body += c;
    }
    body += ';';
  }
  return fmt::format("{:<{}}", body.size(), kPmi2LengthField) + body;
}

}  // namespace hyrun
