#pragma once
// For tests: what the default spdlog logger writes while a CapturedLog lives, as
// "<level> <message>" lines. Make it before anything that logs from a thread of its own and
// drop it after.
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace hyrun::test_support {

struct CapturedLog {
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1000);
  CapturedLog() {
    sink->set_pattern("%l %v");
    spdlog::default_logger()->sinks().push_back(sink);
  }
  ~CapturedLog() { std::erase(spdlog::default_logger()->sinks(), sink); }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;
  std::vector<std::string> lines() { return sink->last_formatted(); }
  /// The messages alone: each line without its level and newline.
  std::vector<std::string> messages() {
    auto all = lines();
    for (auto& l : all) {
      if (l.ends_with('\n')) l.pop_back();
      l.erase(0, l.find(' ') + 1);
    }
    return all;
  }
  int warnings() {
    const auto all = lines();
    return static_cast<int>(
        std::count_if(all.begin(), all.end(), [](const std::string& l) { return l.starts_with("warning "); }));
  }
};

}  // namespace hyrun::test_support
