#include "hyrun/binding/topology.hpp"

#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>

#include <utility>

#include "hwloc_plugins.hpp"
#include "hyrun/common/error.hpp"

namespace hyrun::binding {
namespace {

// Holds a topology between init and a successful load, destroying it on any throw.
struct Pending {
  hwloc_topology_t t = nullptr;
  ~Pending() {
    if (t) hwloc_topology_destroy(t);
  }
  hwloc_topology_t release() noexcept { return std::exchange(t, nullptr); }
};

// `load`: what a load of this machine needs from hwloc's plugins; none for --topology.
Pending init_with_io(std::optional<HwlocLoad> load = std::nullopt) {
  std::optional<HwlocPluginChoice> plugins;
  if (load) plugins.emplace(*load);  // hwloc opens its plugins in the first topology's init
  Pending p;
  if (hwloc_topology_init(&p.t) != 0) {
    p.t = nullptr;
    throw SystemError("hwloc_topology_init", errno);
  }
  // GPUs and NICs are I/O objects, dropped by default.
  hwloc_topology_set_io_types_filter(p.t, HWLOC_TYPE_FILTER_KEEP_ALL);
  return p;
}

bool looks_like_xml(const std::string& source) {
  struct stat st {};
  if (::stat(source.c_str(), &st) == 0) return true;
  return source.size() >= 4 && source.compare(source.size() - 4, 4, ".xml") == 0;
}

}  // namespace

Topology::Topology(hwloc_topology_t topology, std::string description) noexcept
    : topology_(topology), description_(std::move(description)) {}

Topology::Topology(Topology&& other) noexcept
    : topology_(std::exchange(other.topology_, nullptr)), description_(std::move(other.description_)) {}

Topology& Topology::operator=(Topology&& other) noexcept {
  if (this != &other) {
    if (topology_) hwloc_topology_destroy(topology_);
    topology_ = std::exchange(other.topology_, nullptr);
    description_ = std::move(other.description_);
  }
  return *this;
}

Topology::~Topology() {
  if (topology_) hwloc_topology_destroy(topology_);
}

bool Topology::is_this_system() const noexcept { return hwloc_topology_is_thissystem(topology_) != 0; }

Topology Topology::load_this_system() {
  Pending p = init_with_io(HwlocLoad::kDiscovery);
  if (hwloc_topology_load(p.t) != 0) throw SystemError("hwloc could not load this machine's topology", errno);
  // HWLOC_XMLFILE / HWLOC_SYNTHETIC in the environment silently replace the real machine.
  const bool real = hwloc_topology_is_thissystem(p.t) != 0;
  return Topology(p.release(),
                  real ? "this system" : "from the HWLOC_XMLFILE/HWLOC_SYNTHETIC environment, not this system");
}

Topology Topology::discover_whole_machine() {
  Pending p = init_with_io(HwlocLoad::kDiscovery);
  hwloc_topology_set_flags(p.t, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  if (hwloc_topology_load(p.t) != 0) throw SystemError("hwloc could not load this machine's topology", errno);
  return Topology(p.release(), "this system");
}

Topology Topology::from_this_systems_xml(const std::string& xml, std::string description) {
  Pending p = init_with_io(HwlocLoad::kXml);
  // hwloc takes the length with the terminating NUL, as export_xmlbuffer reports it.
  if (hwloc_topology_set_xmlbuffer(p.t, xml.c_str(), static_cast<int>(xml.size() + 1)) != 0 ||
      hwloc_topology_set_flags(
          p.t, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM | HWLOC_TOPOLOGY_FLAG_THISSYSTEM_ALLOWED_RESOURCES) != 0 ||
      hwloc_topology_load(p.t) != 0)
    throw Error("hwloc could not load this machine's topology back from its XML (" + std::to_string(xml.size()) +
                " bytes)");
  return Topology(p.release(), std::move(description));
}

std::string Topology::to_xml() const {
  struct Buffer {
    hwloc_topology_t topology;
    char* text = nullptr;
    ~Buffer() {
      if (text) hwloc_free_xmlbuffer(topology, text);
    }
  } buffer{topology_};
  int length = 0;
  if (hwloc_topology_export_xmlbuffer(topology_, &buffer.text, &length, 0) != 0)
    throw SystemError("hwloc could not export the topology (" + description_ + ") as XML", errno);
  return std::string(buffer.text, length > 0 ? static_cast<std::size_t>(length - 1) : 0);
}

Topology Topology::load_from(const std::string& source) {
  if (source.empty())
    throw UsageError(
        "--topology is empty; give an hwloc XML file or a synthetic description like 'pack:2 core:8 pu:2'");
  Pending p = init_with_io();
  std::string description;
  if (looks_like_xml(source)) {
    if (::access(source.c_str(), R_OK) != 0)
      throw UsageError("--topology '" + source + "' cannot be read (" + std::strerror(errno) +
                       "); give a readable hwloc XML file (lstopo --of xml) or a synthetic description");
    if (hwloc_topology_set_xml(p.t, source.c_str()) != 0)
      throw UsageError("--topology '" + source +
                       "' is not a valid hwloc XML topology; export one with 'lstopo --of xml FILE'");
    description = "XML file " + source;
  } else {
    if (hwloc_topology_set_synthetic(p.t, source.c_str()) != 0)
      throw UsageError("--topology '" + source +
                       "' is neither a file nor a valid hwloc synthetic description; "
                       "expected e.g. 'pack:2 numa:2 core:8 pu:2'");
    description = "synthetic '" + source + "'";
  }
  if (hwloc_topology_load(p.t) != 0)
    throw UsageError("--topology '" + source + "' could not be loaded by hwloc (" + std::strerror(errno) +
                     "); check that it is a complete hwloc 2.x topology");
  return Topology(p.release(), std::move(description));
}

}  // namespace hyrun::binding
