#pragma once
// A one-line progress indicator for terminals ("phase 2 of 4: 4 ranks joining"), rewritten in place.
// It prints nothing at all when its stream is not a terminal, so logs that CloudAI parses never
// contain it. Call clear() before printing other lines to a terminal so they do not mix.
#include <cstddef>
#include <cstdio>
#include <string_view>

namespace hyrun::ep::bench {

class ProgressLine {
 public:
  /// Enabled when `out` is a terminal.
  explicit ProgressLine(std::FILE* out = stdout);
  /// Enabled when `is_terminal` (tests, or a --progress flag that overrides detection).
  ProgressLine(std::FILE* out, bool is_terminal);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool enabled() const noexcept { return enabled_; }
  /// Shows "phase {phase+1} of {num_phases}" and the detail, if any (phase is 0-based).
  void update(std::size_t phase, std::size_t num_phases, std::string_view detail = {});
  /// Erases the line (also done on destruction when something is shown).
  void clear();

 private:
  std::FILE* out_;
  bool enabled_;
  bool shown_ = false;
};

}  // namespace hyrun::ep::bench
