#include "hyrun/launcher/rank_environment.hpp"

#include <map>
#include <string_view>

extern char** environ;

namespace hyrun {
namespace {

bool inherited(std::string_view name) {
  if (name == env::kLogLevel) return true;
  return !name.starts_with("HYRUN_") && !name.starts_with("PMIX_");
}

}  // namespace

std::vector<std::string> build_rank_environment(const RankEnvironment& contract, const EnvironmentEntries& binding,
                                                const std::vector<std::string>& exports,
                                                const EnvironmentEntries& defaults) {
  std::vector<std::string> order;  // first-seen order keeps the environment readable
  std::map<std::string, std::string, std::less<>> values;
  auto set = [&](const std::string& name, const std::string& value) {
    if (values.find(name) == values.end()) order.push_back(name);
    values[name] = value;
  };
  for (char** e = environ; *e; ++e) {
    const std::string_view entry(*e);
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string name(entry.substr(0, eq));
    if (inherited(name)) set(name, std::string(entry.substr(eq + 1)));
  }
  for (const auto& [name, value] : binding) set(name, value);
  for (const auto& item : exports) {
    const auto eq = item.find('=');
    set(item.substr(0, eq), item.substr(eq + 1));
  }
  for (const auto& [name, value] : contract.to_variables()) set(name, value);
  for (const auto& layer : {contract.default_variables(), defaults})
    for (const auto& [name, value] : layer)
      if (values.find(name) == values.end()) set(name, value);

  std::vector<std::string> out;
  out.reserve(order.size());
  for (const auto& name : order) out.push_back(name + "=" + values[name]);
  return out;
}

}  // namespace hyrun
