#pragma once
// One logging set-up for hyrun and the worker library: spdlog on stderr, one line
// per message, prefixed with the component ("hyrun" or "hyrun-worker[rank]").
#include <spdlog/sinks/sink.h>

#include <memory>
#include <string>

namespace hyrun {

/// Configures the default spdlog logger. `level` is an spdlog level name
/// (trace, debug, info, warn, error, critical, off); throws UsageError otherwise. `sink`:
/// where lines go; when null, stderr through stdio (blocking, as a pipeline's writer's would).
void init_logging(const std::string& component, const std::string& level,
                  std::shared_ptr<spdlog::sinks::sink> sink = nullptr);

/// The level from HYRUN_LOG_LEVEL, or `fallback` when unset.
std::string log_level_from_environment(const std::string& fallback);

}  // namespace hyrun
