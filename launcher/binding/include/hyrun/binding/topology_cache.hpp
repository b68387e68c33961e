#pragma once
// This machine's hwloc topology kept as XML in a directory of this user, so that a launch
// skips hwloc's I/O discovery while nothing it depends on has changed. That discovery reads
// every PCI device's config space: 3-7 ms a device on a VM, serialised by the kernel, so 16
// launches on one host spend ~350 ms where the XML loads in well under 1 ms each
// (docs/performance-journal.md). Slurm's slurmd keeps a topology file for the same reason.
//
// An entry holds the whole machine (discovered with HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED)
// and is loaded as this system with its allowed resources read afresh
// (HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM | THISSYSTEM_ALLOWED_RESOURCES): the job's cpuset cgroup
// restricts a cached topology exactly as it restricts a discovered one.
#include <optional>
#include <string>

#include "hyrun/binding/topology.hpp"
#include "hyrun/common/env_contract.hpp"

namespace hyrun::binding {

class TopologyCache {
 public:
  /// The cache in `directory` (created with mode 0700 when missing; nothing is touched until load()).
  explicit TopologyCache(std::string directory);

  /// This machine's topology, as Topology::load_this_system() gives it: from this host's entry
  /// when its machine key equals machine_key(), else discovered and stored for the next launch.
  /// The cache never fails a launch: a directory another user owns or could write in is not
  /// used (one warning naming it), and an unreadable, stale or malformed entry is replaced, as
  /// is one whose CPU sets disagree with the kernel's (one warning naming the disagreement).
  /// Throws only what discovery itself throws.
  Topology load() const;

  /// What an entry is valid for, one "name: value" line each: the entry format, hwloc's
  /// version, the boot id, the online CPUs and NUMA nodes, every PCI device with its driver,
  /// and the names in the device classes hwloc makes OS devices of (net, infiniband, drm,
  /// dma, block, ...). A reboot, a hot-plugged or re-bound device, a new network interface or
  /// an offlined CPU changes it. Memory sizes are not in it: they are as at discovery.
  static std::string machine_key();

  /// This host's entry: `<directory>/topology-<hostname>.xml` (hosts may share a TMPDIR).
  std::string entry_path() const;
  const std::string& directory() const noexcept { return directory_; }

 private:
  std::string directory_;
};

/// Where hyrun keeps the cache: $HYRUN_TOPOLOGY_CACHE when set (a directory, or "off"),
/// else `<temporary_root>/hyrun-topology-<uid>`. std::nullopt (discover every launch) for
/// "off", and while any HWLOC_* variable is set, since those change what discovery finds
/// (HWLOC_XMLFILE, HWLOC_SYNTHETIC, HWLOC_COMPONENTS, ...).
std::optional<std::string> topology_cache_directory(const std::string& temporary_root);

/// The variable that names the cache directory, or "off".
inline constexpr const char* kTopologyCacheVariable = env::kTopologyCache;

}  // namespace hyrun::binding
