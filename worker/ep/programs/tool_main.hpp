#pragma once
// The part of main() that every EP program started by hyrun shares (ep-check, ep-bench-host,
// ep-bench-gpu, ep-bench): the command line parsed with one meaning of its exit codes, then
// logging set up and the program run, the one place its errors are caught. A hyrun::Error
// prints "<tool>: <what>" on stderr and gives its exit code (1, 2 usage, 124 time-out:
// docs/ep.md); any other exception prints "<tool>: internal error: <what>" and gives 1. One
// line, never a core dump.
#include <CLI/CLI.hpp>
#include <functional>
#include <optional>

namespace hyrun::ep::tools {

/// Parses the command line into `app`. Returns the exit code when the program is done:
/// 0 after --help, 2 after a usage error, which is said as "<name>: <what>; see <name>
/// --help" on stderr (CLI11's own codes, 105 and the like, would read as a crash).
/// std::nullopt: the program goes on.
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv, const char* name);

int run_tool(const char* name, const std::function<int()>& body) noexcept;

/// parse_command_line, then run_tool: the whole main() of a program.
int run_program(CLI::App& app, int argc, char** argv, const char* name, const std::function<int()>& body);

}  // namespace hyrun::ep::tools
