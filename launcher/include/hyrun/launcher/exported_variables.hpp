#pragma once
// The variables that -x / --export pass to the ranks (docs/cli.md).
#include <string>
#include <vector>

namespace hyrun {

/// True for a name an environment variable may have: letters, digits and _, not starting
/// with a digit.
bool valid_variable_name(const std::string& name);

/// The environment entries that -x adds: "VAR=value" as given, or "VAR=<hyrun's value>".
/// Throws UsageError for a malformed name or a VAR that hyrun's environment lacks.
std::vector<std::string> resolve_exports(const std::vector<std::string>& exported);

}  // namespace hyrun
