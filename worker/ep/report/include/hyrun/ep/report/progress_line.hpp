#pragma once
// A progress indicator for people watching a terminal ("phase 2 of 4: plan 1 of 1").
// On a terminal it is one line rewritten in place. Under hyrun a rank's stdout is a pipe to
// hyrun, which forwards whole lines only: when hyrun says its own stdout is a terminal
// (HYRUN_OUTPUT_TERMINAL=1), each update is printed as a line of its own instead. On any
// other stream it prints nothing at all, so logs that CloudAI parses never contain it.
// Call clear() before printing other lines to a terminal so they do not mix.
#include <cstddef>
#include <cstdio>
#include <string_view>

namespace hyrun::ep::report {

class ProgressLine {
 public:
  enum class Mode { kOff, kInPlace, kLines };

  /// kInPlace when `out` is a terminal; kLines when `out` is stdout and hyrun's own stdout
  /// is a terminal; else kOff.
  explicit ProgressLine(std::FILE* out = stdout);
  /// An explicit mode (tests, or a flag that overrides detection).
  ProgressLine(std::FILE* out, Mode mode);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool enabled() const noexcept { return mode_ != Mode::kOff; }
  Mode mode() const noexcept { return mode_; }
  /// Shows "phase {phase+1} of {num_phases}" and the detail, if any (phase is 0-based).
  void update(std::size_t phase, std::size_t num_phases, std::string_view detail = {});
  /// Erases the in-place line (also done on destruction when something is shown).
  void clear();

 private:
  std::FILE* out_;
  Mode mode_;
  bool shown_ = false;
};

}  // namespace hyrun::ep::report
