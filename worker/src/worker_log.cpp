#include "worker_log.hpp"

#include <spdlog/sinks/stdout_sinks.h>

#include <cstdlib>

#include "hyrun/common/env_contract.hpp"

namespace hyrun {

spdlog::logger& worker_log() {
  static const std::shared_ptr<spdlog::logger> logger = [] {
    const char* rank = std::getenv(env::kRank);
    auto l = std::make_shared<spdlog::logger>("hyrun-worker", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l->set_pattern(fmt::format("hyrun-worker[{}]: %l: %v", rank ? rank : "?"));
    const char* level = std::getenv(env::kLogLevel);
    const auto parsed = level ? spdlog::level::from_str(level) : spdlog::level::warn;
    l->set_level(level && parsed == spdlog::level::off && std::string(level) != "off" ? spdlog::level::warn : parsed);
    l->flush_on(spdlog::level::trace);
    return l;
  }();
  return *logger;
}

}  // namespace hyrun
