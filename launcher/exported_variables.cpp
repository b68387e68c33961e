#include "hyrun/launcher/exported_variables.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cstdlib>

#include "hyrun/common/error.hpp"

namespace hyrun {

bool valid_variable_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

std::vector<std::string> resolve_exports(const std::vector<std::string>& exported) {
  std::vector<std::string> out;
  for (const auto& item : exported) {
    const auto eq = item.find('=');
    const std::string name = item.substr(0, eq);
    if (!valid_variable_name(name))
      throw UsageError(fmt::format(
          "-x '{}': '{}' is not a variable name (letters, digits and _, not starting with a digit)", item, name));
    if (eq != std::string::npos) {
      out.push_back(item);
      continue;
    }
    const char* value = std::getenv(name.c_str());
    if (!value)
      throw UsageError(
          fmt::format("-x {}: {} is not set in hyrun's environment; give a value with -x {}=value", name, name, name));
    out.push_back(name + "=" + value);
  }
  return out;
}

}  // namespace hyrun
