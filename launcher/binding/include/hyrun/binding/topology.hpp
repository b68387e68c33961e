#pragma once
// Owner of one loaded hwloc topology, I/O objects (PCI devices, OS devices) kept.
#include <hwloc.h>

#include <string>

namespace hyrun::binding {

class Topology {
 public:
  /// This machine's topology. Throws hyrun::Error when hwloc cannot load it.
  static Topology load_this_system();
  /// A topology from `source`: the path of an hwloc XML file (an existing file, or a name
  /// ending in ".xml") or else a synthetic description such as "pack:2 numa:2 core:8 pu:2".
  /// Throws UsageError naming `source` when it cannot be read or parsed.
  static Topology load_from(const std::string& source);
  /// This whole machine, CPUs and memory outside this process's cgroup included, for storing
  /// (TopologyCache); plan only with a topology loaded from it by from_this_systems_xml().
  static Topology discover_whole_machine();
  /// A topology this machine exported (to_xml() of discover_whole_machine()), loaded as this
  /// system with the resources this process may use now (its cgroup) applied, as a fresh
  /// load_this_system() would. Throws Error when hwloc cannot parse `xml`.
  static Topology from_this_systems_xml(const std::string& xml, std::string description);

  Topology(Topology&& other) noexcept;
  Topology& operator=(Topology&& other) noexcept;
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;
  ~Topology();

  hwloc_topology_t get() const noexcept { return topology_; }
  /// False for XML and synthetic topologies: binding against them would be a silent no-op.
  bool is_this_system() const noexcept;
  /// The topology as hwloc XML (hwloc_topology_export_xmlbuffer).
  std::string to_xml() const;
  /// Where it came from, for reports: "this system", "XML file X" or "synthetic 'X'".
  const std::string& description() const noexcept { return description_; }

 private:
  Topology(hwloc_topology_t topology, std::string description) noexcept;
  hwloc_topology_t topology_ = nullptr;
  std::string description_;
};

}  // namespace hyrun::binding
