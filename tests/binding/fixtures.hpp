#pragma once
// Paths of the generated topology fixtures and an injectable environment for the tests.
#include <map>
#include <optional>
#include <string>

#include "hyrun/binding/binding_plan.hpp"

namespace hyrun::binding::test {

inline std::string fixture(const std::string& name) { return std::string(HYRUN_BINDING_FIXTURE_DIR) + "/" + name; }

/// An environment holding only `vars` (the real one must not leak into expectations).
inline EnvironmentLookup env_of(std::map<std::string, std::string> vars = {}) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

inline BindingOptions on(const std::string& fixture_name) {
  BindingOptions o;
  o.topology = fixture(fixture_name);
  return o;
}

}  // namespace hyrun::binding::test
