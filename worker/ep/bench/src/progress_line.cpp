#include "hyrun/ep/bench/progress_line.hpp"

#include <fmt/format.h>
#include <unistd.h>

namespace hyrun::ep::bench {

ProgressLine::ProgressLine(std::FILE* out) : ProgressLine(out, out != nullptr && ::isatty(::fileno(out)) == 1) {}

ProgressLine::ProgressLine(std::FILE* out, bool is_terminal) : out_(out), enabled_(out != nullptr && is_terminal) {}

ProgressLine::~ProgressLine() { clear(); }

void ProgressLine::update(std::size_t phase, std::size_t num_phases, std::string_view detail) {
  if (!enabled_) return;
  // "\r" + erase-to-end-of-line rewrites the line in place.
  if (detail.empty()) fmt::print(out_, "\r\x1b[Kphase {} of {}", phase + 1, num_phases);
  else fmt::print(out_, "\r\x1b[Kphase {} of {}: {}", phase + 1, num_phases, detail);
  std::fflush(out_);
  shown_ = true;
}

void ProgressLine::clear() {
  if (!enabled_ || !shown_) return;
  fmt::print(out_, "\r\x1b[K");
  std::fflush(out_);
  shown_ = false;
}

}  // namespace hyrun::ep::bench
