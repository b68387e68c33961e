#include "rank_pool.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hyrun/common/error.hpp"

namespace hyrun::ep::elastic {

RankPool::RankPool(int first_free, int world_size, const std::string& root_host)
    : next_(first_free), world_size_(world_size) {
  for (int r = 0; r < first_free; ++r) {
    where_[r] = {root_host, r};
    busy_[root_host].insert(r);
  }
}

Placement RankPool::take(int count, const std::string& host) {
  std::lock_guard lock(mutex_);
  const int available = static_cast<int>(released_.size()) + (world_size_ - next_);
  if (count > available)
    throw Error(
        fmt::format("the plan has {} rank(s) left to give (released: [{}], never given: {} of {}), this launch "
                    "asks for {}",
                    available, fmt::join(released_, ", "), world_size_ - next_, world_size_, count));
  Placement placement;
  auto& busy = busy_[host];
  int slot = 0;
  while (static_cast<int>(placement.ranks.size()) < count) {
    int rank;
    if (!released_.empty()) {
      rank = *released_.begin();
      released_.erase(released_.begin());
    } else {
      rank = next_++;
    }
    while (busy.contains(slot)) ++slot;
    busy.insert(slot);
    where_[rank] = {host, slot};
    placement.ranks.push_back(rank);
    placement.local_ranks.push_back(slot);
  }
  return placement;
}

void RankPool::release(int rank) {
  std::lock_guard lock(mutex_);
  released_.insert(rank);
  if (const auto it = where_.find(rank); it != where_.end()) {
    busy_[it->second.first].erase(it->second.second);
    where_.erase(it);
  }
}

}  // namespace hyrun::ep::elastic
