#include "hyrun/common/planned_exit.hpp"

#include <fmt/format.h>
#include <sys/wait.h>

#include <charconv>
#include <cstring>

namespace hyrun {
namespace {

constexpr std::string_view kPrefix = "planned-exit v2 respawn=";

std::optional<int> parse_number(std::string_view text, int min, int max) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max) return std::nullopt;
  return value;
}

}  // namespace

bool PlannedExit::matches(int wait_status) const {
  if (signal != 0) return WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == signal;
  return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == exit_code;
}

std::string PlannedExit::describe() const {
  if (signal == 0) return fmt::format("exit with code {}", exit_code);
  const char* name = sigabbrev_np(signal);
  return name ? fmt::format("death by signal {} (SIG{})", signal, name) : fmt::format("death by signal {}", signal);
}

std::string format_planned_exit(const PlannedExit& planned) {
  return fmt::format("{}{} {}={}", kPrefix, planned.respawn ? 1 : 0, planned.signal ? "signal" : "exit",
                     planned.signal ? planned.signal : planned.exit_code);
}

std::optional<PlannedExit> parse_planned_exit(std::string_view message) {
  if (!message.starts_with(kPrefix)) return std::nullopt;
  message.remove_prefix(kPrefix.size());
  PlannedExit planned;
  if (message.starts_with("1 "))
    planned.respawn = true;
  else if (!message.starts_with("0 "))
    return std::nullopt;
  message.remove_prefix(2);
  if (message.starts_with("exit=")) {
    const auto code = parse_number(message.substr(5), 0, 255);
    if (!code) return std::nullopt;
    planned.exit_code = *code;
  } else if (message.starts_with("signal=")) {
    const auto sig = parse_number(message.substr(7), 1, 64);
    if (!sig) return std::nullopt;
    planned.signal = *sig;
  } else {
    return std::nullopt;
  }
  return planned;
}

}  // namespace hyrun
