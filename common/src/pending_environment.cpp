#include "hyrun/common/pending_environment.hpp"

#include <string>

namespace hyrun {
namespace {

constexpr std::string_view kPrefix = "hyrun-environment v1";

bool valid_name(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name)
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

}  // namespace

std::string pending_environment_file(int rank) { return "rank." + std::to_string(rank); }

std::string format_pending_environment(const std::vector<std::string>& entries) {
  std::string message(kPrefix);
  for (const auto& entry : entries) {
    message.push_back('\0');
    message += entry;
  }
  return message;
}

std::optional<std::vector<std::string>> parse_pending_environment(std::string_view message) {
  if (message.size() > kMaxPendingEnvironmentBytes || !message.starts_with(kPrefix)) return std::nullopt;
  message.remove_prefix(kPrefix.size());
  std::vector<std::string> entries;
  while (!message.empty()) {
    if (message[0] != '\0') return std::nullopt;  // the prefix runs on: not this message
    message.remove_prefix(1);
    const auto end = message.find('\0');
    const std::string_view entry = message.substr(0, end);
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos || !valid_name(entry.substr(0, eq))) return std::nullopt;
    entries.emplace_back(entry);
    message.remove_prefix(entry.size());
  }
  return entries;
}

}  // namespace hyrun
