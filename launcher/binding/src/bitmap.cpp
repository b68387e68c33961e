#include "hyrun/binding/bitmap.hpp"

#include <new>

namespace hyrun::binding {

Bitmap::Bitmap() : bitmap_(hwloc_bitmap_alloc()) {
  if (!bitmap_) throw std::bad_alloc();
}

Bitmap Bitmap::copy_of(hwloc_const_bitmap_t other) {
  Bitmap b;
  if (other && hwloc_bitmap_copy(b.get(), other) != 0) throw std::bad_alloc();
  return b;
}

Bitmap Bitmap::from_indexes(const std::vector<int>& indexes) {
  Bitmap b;
  for (int i : indexes)
    if (hwloc_bitmap_set(b.get(), static_cast<unsigned>(i)) != 0) throw std::bad_alloc();
  return b;
}

std::vector<int> Bitmap::indexes() const {
  std::vector<int> out;
  // An infinite bitmap (hwloc "full") has no last index; callers only pass finite sets.
  for (int i = hwloc_bitmap_first(get()); i != -1; i = hwloc_bitmap_next(get(), i)) out.push_back(i);
  return out;
}

}  // namespace hyrun::binding
