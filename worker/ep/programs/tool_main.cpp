#include "tool_main.hpp"

#include <cstdio>
#include <exception>

#include "hyrun/common/error.hpp"
#include "hyrun/common/logging.hpp"

namespace hyrun::ep::tools {

std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv, const char* name) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s; see %s --help\n", name, e.what(), name);
    return exit_code::kUsage;
  }
  return std::nullopt;
}

int run_program(CLI::App& app, int argc, char** argv, const char* name, const std::function<int()>& body) {
  if (const auto done = parse_command_line(app, argc, argv, name)) return *done;
  return run_tool(name, body);
}

int run_tool(const char* name, const std::function<int()>& body) noexcept {
  try {
    init_logging(name, log_level_from_environment("warn"));
    return body();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s\n", name, e.what());
    return exit_code::kLauncherError;
  } catch (...) {
    std::fprintf(stderr, "%s: internal error: an exception that is not a std::exception\n", name);
    return exit_code::kLauncherError;
  }
}

}  // namespace hyrun::ep::tools
