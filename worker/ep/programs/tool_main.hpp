#pragma once
// The part of main() that every EP tool started by hyrun shares (ep-check, ep-bench-host,
// ep-bench-gpu): after its command line is parsed, set up logging and run the tool, the one
// place its errors are caught. A hyrun::Error prints "<tool>: <what>" on stderr and gives
// its exit code (1, 2 usage, 124 time-out: docs/ep.md); any other exception prints
// "<tool>: internal error: <what>" and gives 1. One line, never a core dump.
#include <functional>

namespace hyrun::ep::tools {

int run_tool(const char* name, const std::function<int()>& body) noexcept;

}  // namespace hyrun::ep::tools
