#include "hyrun/pmix/info_list.hpp"

#include <fmt/format.h>

#include <utility>

#include "hyrun/common/error.hpp"
#include "hyrun/pmix/status.hpp"

namespace hyrun::pmix {

InfoArray::~InfoArray() {
  if (array_.array != nullptr) PMIx_Data_array_destruct(&array_);
}

InfoArray::InfoArray(InfoArray&& other) noexcept
    : array_(std::exchange(other.array_, pmix_data_array_t{PMIX_UNDEF, 0, nullptr})) {}

InfoArray& InfoArray::operator=(InfoArray&& other) noexcept {
  if (this != &other) {
    if (array_.array != nullptr) PMIx_Data_array_destruct(&array_);
    array_ = std::exchange(other.array_, pmix_data_array_t{PMIX_UNDEF, 0, nullptr});
  }
  return *this;
}

InfoList::InfoList() : list_(PMIx_Info_list_start()) {
  if (list_ == nullptr) throw Error("PMIx: cannot start an info list (out of memory)");
}

InfoList::~InfoList() { PMIx_Info_list_release(list_); }

void InfoList::add_raw(const char* key, const void* value, pmix_data_type_t type) {
  throw_if_failed(PMIx_Info_list_add(list_, key, value, type), fmt::format("PMIx: adding '{}' to an info list", key));
}

void InfoList::add(const char* key, const std::string& value) { add_raw(key, value.c_str(), PMIX_STRING); }
void InfoList::add(const char* key, std::uint32_t value) { add_raw(key, &value, PMIX_UINT32); }
void InfoList::add(const char* key, std::uint16_t value) { add_raw(key, &value, PMIX_UINT16); }
void InfoList::add(const char* key, bool value) { add_raw(key, &value, PMIX_BOOL); }
void InfoList::add_rank(const char* key, std::uint32_t rank) {
  const pmix_rank_t r = rank;
  add_raw(key, &r, PMIX_PROC_RANK);
}

void InfoList::add_topology(const char* key, pmix_topology_t& topology) { add_raw(key, &topology, PMIX_TOPO); }

void InfoList::add(const char* key, InfoList& inner) {
  InfoArray array = inner.to_array();
  add_raw(key, array.raw(), PMIX_DATA_ARRAY);
}

InfoArray InfoList::to_array() {
  InfoArray array;
  const pmix_status_t rc = PMIx_Info_list_convert(list_, &array.array_);
  if (rc != PMIX_ERR_EMPTY) throw_if_failed(rc, "PMIx: converting an info list");
  return array;
}

}  // namespace hyrun::pmix
