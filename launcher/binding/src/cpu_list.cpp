#include "hyrun/binding/cpu_list.hpp"

#include <algorithm>
#include <charconv>

#include "hyrun/common/error.hpp"

namespace hyrun::binding {
namespace {

int parse_index(std::string_view token, std::string_view text, std::string_view what) {
  int value = -1;
  const auto* end = token.data() + token.size();
  const auto [ptr, ec] = std::from_chars(token.data(), end, value);
  // Bounded so that a typo cannot ask for a multi-gigabyte mask.
  if (token.empty() || ec != std::errc() || ptr != end || value < 0 || value > 65535)
    throw UsageError(std::string(what) + " '" + std::string(text) + "' is not a CPU list: '" + std::string(token) +
                     "' is not an index from 0 to 65535; expected e.g. 0-3,8,10-11");
  return value;
}

}  // namespace

std::vector<int> parse_cpu_list(std::string_view text, std::string_view what) {
  if (text.empty()) throw UsageError(std::string(what) + " is empty; expected a CPU list such as 0-3,8,10-11");
  std::vector<int> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    const std::size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      out.push_back(parse_index(item, text, what));
    } else {
      const int first = parse_index(item.substr(0, dash), text, what);
      const int last = parse_index(item.substr(dash + 1), text, what);
      if (last < first)
        throw UsageError(std::string(what) + " '" + std::string(text) + "' has the reversed range '" +
                         std::string(item) + "'; write ranges low-high, e.g. " + std::to_string(last) + "-" +
                         std::to_string(first));
      for (int i = first; i <= last; ++i) out.push_back(i);
    }
    start = comma + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace hyrun::binding
