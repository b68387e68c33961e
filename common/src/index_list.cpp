#include "hyrun/common/index_list.hpp"

#include <fmt/format.h>

namespace hyrun {

std::string format_index_list(const std::vector<int>& indexes) {
  std::string out;
  for (std::size_t i = 0; i < indexes.size();) {
    std::size_t j = i;
    while (j + 1 < indexes.size() && indexes[j + 1] == indexes[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j > i ? fmt::format("{}-{}", indexes[i], indexes[j]) : fmt::format("{}", indexes[i]);
    i = j + 1;
  }
  return out;
}

}  // namespace hyrun
