#include "hyrun/common/logging.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

#include "hyrun/common/env_contract.hpp"
#include "hyrun/common/error.hpp"

namespace hyrun {

void init_logging(const std::string& component, const std::string& level, std::shared_ptr<spdlog::sinks::sink> sink) {
  const auto parsed = spdlog::level::from_str(level);
  // from_str maps unknown names to "off"; only accept "off" when it was asked for.
  if (parsed == spdlog::level::off && level != "off")
    throw UsageError("log level '" + level + "' is unknown; use trace, debug, info, warn, error, critical or off");
  // Not registered by name, so that calling this again (tests, re-initialisation) is harmless.
  // The thread-safe sink: the node link's heartbeat thread and ep-bench's join server log
  // beside the main thread.
  if (!sink) sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>(component, std::move(sink));
  logger->set_pattern(component + ": %^%l%$: %v");
  logger->set_level(parsed);
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(std::move(logger));
}

std::string log_level_from_environment(const std::string& fallback) {
  const char* value = std::getenv(env::kLogLevel);
  return value && *value ? value : fallback;
}

}  // namespace hyrun
