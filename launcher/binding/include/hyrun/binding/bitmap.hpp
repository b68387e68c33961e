#pragma once
// Owning wrapper of an hwloc bitmap (cpuset or nodeset), so that every early return
// and exception frees it.
#include <hwloc.h>

#include <memory>
#include <vector>

namespace hyrun::binding {

class Bitmap {
 public:
  /// An empty bitmap. Throws std::bad_alloc when hwloc cannot allocate.
  Bitmap();
  /// A copy of `other` (which may be a topology-owned const set).
  static Bitmap copy_of(hwloc_const_bitmap_t other);
  /// The bitmap with exactly these indexes set.
  static Bitmap from_indexes(const std::vector<int>& indexes);

  hwloc_bitmap_t get() const noexcept { return bitmap_.get(); }
  bool empty() const noexcept { return hwloc_bitmap_iszero(get()); }
  int weight() const noexcept { return hwloc_bitmap_weight(get()); }
  /// Set indexes in increasing order.
  std::vector<int> indexes() const;
  /// this &= other.
  void intersect(hwloc_const_bitmap_t other) noexcept { hwloc_bitmap_and(get(), get(), other); }
  void unite(hwloc_const_bitmap_t other) noexcept { hwloc_bitmap_or(get(), get(), other); }

 private:
  struct Free {
    void operator()(hwloc_bitmap_t b) const noexcept { hwloc_bitmap_free(b); }
  };
  std::unique_ptr<hwloc_bitmap_s, Free> bitmap_;
};

}  // namespace hyrun::binding
