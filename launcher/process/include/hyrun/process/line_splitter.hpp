#pragma once
// Cuts a byte stream into whole lines so that output of many ranks never interleaves
// inside a line. A line longer than `max_line` is emitted in pieces of that size, so a
// rank printing without a newline cannot make the launcher hold unbounded memory. Lines up
// to 16 MiB pass whole; a longer one may interleave with other ranks at piece boundaries.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace hyrun {

class LineSplitter {
 public:
  explicit LineSplitter(std::size_t max_line = 16 << 20) : max_line_(max_line) {}

  /// Appends `data`; returns the complete lines (with their '\n') and over-long pieces.
  std::vector<std::string> feed(std::string_view data);
  /// At end of stream: what remains, without a newline added (empty if nothing).
  std::string finish();
  /// Bytes of the line not ended yet.
  std::size_t pending_size() const { return pending_.size(); }

 private:
  std::size_t max_line_;
  std::string pending_;
};

}  // namespace hyrun
