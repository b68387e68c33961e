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
    pending_.insert(rank);
    where_[rank] = {host, slot};
    placement.ranks.push_back(rank);
    placement.local_ranks.push_back(slot);
  }
  return placement;
}

void RankPool::release(int rank) {
  std::lock_guard lock(mutex_);
  release_locked(rank);
}

void RankPool::release_locked(int rank) {
  released_.insert(rank);
  pending_.erase(rank);
  if (const auto it = where_.find(rank); it != where_.end()) {
    busy_[it->second.first].erase(it->second.second);
    where_.erase(it);
  }
}

void RankPool::joined(int rank) {
  std::lock_guard lock(mutex_);
  pending_.erase(rank);
}

std::vector<int> RankPool::give_back_pending(const std::vector<int>& ranks) {
  std::lock_guard lock(mutex_);
  std::vector<int> given;
  for (int r : ranks)
    if (pending_.contains(r)) {
      release_locked(r);
      given.push_back(r);
    }
  return given;
}

}  // namespace hyrun::ep::elastic
