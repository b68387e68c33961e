#include "hyrun/ep/report/progress_line.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <string_view>

#include "hyrun/common/env_contract.hpp"

namespace hyrun::ep::report {
namespace {

ProgressLine::Mode detect(std::FILE* out) {
  if (out == nullptr) return ProgressLine::Mode::kOff;
  if (::isatty(::fileno(out)) == 1) return ProgressLine::Mode::kInPlace;
  const char* terminal = std::getenv(env::kOutputTerminal);
  if (out == stdout && terminal != nullptr && std::string_view(terminal) == "1") return ProgressLine::Mode::kLines;
  return ProgressLine::Mode::kOff;
}

}  // namespace

ProgressLine::ProgressLine(std::FILE* out) : ProgressLine(out, detect(out)) {}

ProgressLine::ProgressLine(std::FILE* out, Mode mode) : out_(out), mode_(out != nullptr ? mode : Mode::kOff) {}

ProgressLine::~ProgressLine() { clear(); }

void ProgressLine::update(std::size_t phase, std::size_t num_phases, std::string_view detail) {
  if (mode_ == Mode::kOff) return;
  const std::string text = detail.empty() ? fmt::format("phase {} of {}", phase + 1, num_phases)
                                          : fmt::format("phase {} of {}: {}", phase + 1, num_phases, detail);
  // "\r" + erase-to-end-of-line rewrites the line in place; hyrun forwards only whole lines.
  if (mode_ == Mode::kInPlace)
    fmt::print(out_, "\r\x1b[K{}", text);
  else
    fmt::print(out_, "{}\n", text);
  std::fflush(out_);
  shown_ = mode_ == Mode::kInPlace;
}

void ProgressLine::clear() {
  if (!shown_) return;
  fmt::print(out_, "\r\x1b[K");
  std::fflush(out_);
  shown_ = false;
}

}  // namespace hyrun::ep::report
