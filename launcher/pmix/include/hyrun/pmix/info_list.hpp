#pragma once
// Owners of PMIx info arrays, built with libpmix's own list API (PMIx_Info_list_*), which
// copies every value in: nothing added here needs to outlive the call that added it.
//
//   InfoList job;
//   job.add(PMIX_JOB_SIZE, std::uint32_t{4});
//   InfoArray array = job.to_array();  // pass array.data(), array.size() to libpmix
#include <pmix.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace hyrun::pmix {

/// A pmix_data_array_t of pmix_info_t, destructed (with every value in it) on every path.
class InfoArray {
 public:
  InfoArray() = default;
  ~InfoArray();
  InfoArray(InfoArray&& other) noexcept;
  InfoArray& operator=(InfoArray&& other) noexcept;
  InfoArray(const InfoArray&) = delete;
  InfoArray& operator=(const InfoArray&) = delete;

  pmix_info_t* data() { return static_cast<pmix_info_t*>(array_.array); }
  std::size_t size() const { return array_.size; }
  /// The array itself, for a value of type PMIX_DATA_ARRAY (libpmix copies it).
  pmix_data_array_t* raw() { return &array_; }

 private:
  friend class InfoList;
  pmix_data_array_t array_{PMIX_UNDEF, 0, nullptr};
};

/// A growing list of info entries. Throws hyrun::Error naming the key when libpmix refuses one.
class InfoList {
 public:
  InfoList();
  ~InfoList();
  InfoList(const InfoList&) = delete;
  InfoList& operator=(const InfoList&) = delete;

  void add(const char* key, const std::string& value);  ///< PMIX_STRING
  void add(const char* key, std::uint32_t value);       ///< PMIX_UINT32
  void add(const char* key, std::uint16_t value);       ///< PMIX_UINT16
  void add(const char* key, bool value);                ///< PMIX_BOOL
  void add_rank(const char* key, std::uint32_t rank);   ///< PMIX_PROC_RANK
  /// PMIX_TOPO: libpmix keeps the pointer to the hwloc topology, not a copy.
  void add_topology(const char* key, pmix_topology_t& topology);
  /// PMIX_DATA_ARRAY of the entries of `inner` (e.g. one process's data).
  void add(const char* key, InfoList& inner);

  InfoArray to_array();

 private:
  void add_raw(const char* key, const void* value, pmix_data_type_t type);
  void* list_;
};

}  // namespace hyrun::pmix
