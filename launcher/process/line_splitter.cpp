#include "hyrun/process/line_splitter.hpp"

namespace hyrun {

std::vector<std::string> LineSplitter::feed(std::string_view data) {
  std::vector<std::string> out;
  while (!data.empty()) {
    const auto newline = data.find('\n');
    const std::size_t room = max_line_ - pending_.size();  // > 0: a full piece is always emitted
    if (newline != std::string_view::npos && newline <= room) {
      pending_.append(data.substr(0, newline + 1));
      data.remove_prefix(newline + 1);
      out.push_back(std::move(pending_));
      pending_.clear();
    } else if (newline == std::string_view::npos && data.size() < room) {
      pending_.append(data);
      break;
    } else {
      // The line is longer than max_line: emit a full piece and keep going.
      pending_.append(data.substr(0, room));
      data.remove_prefix(room);
      out.push_back(std::move(pending_));
      pending_.clear();
    }
  }
  return out;
}

std::string LineSplitter::finish() {
  std::string rest = std::move(pending_);
  pending_.clear();
  return rest;
}

}  // namespace hyrun
