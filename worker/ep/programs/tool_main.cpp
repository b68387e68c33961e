#include "tool_main.hpp"

#include <cstdio>
#include <exception>

#include "hyrun/common/error.hpp"
#include "hyrun/common/logging.hpp"

namespace hyrun::ep::tools {

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
