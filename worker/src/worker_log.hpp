#pragma once
// The worker library's own logger ("hyrun-worker" on stderr, level from HYRUN_LOG_LEVEL,
// default warn). It never touches the program's default spdlog logger.
#include <spdlog/spdlog.h>

namespace hyrun {

spdlog::logger& worker_log();

}  // namespace hyrun
