#pragma once
// Which of hwloc's plugins a topology load of this machine may bring into hyrun's process.
//
// hwloc opens every plugin it has when a process creates its first topology. Debian's has
// four: PCI (libpciaccess), libxml2 (with ICU), OpenCL and GL (with X11). hyrun's plans use
// hwloc's built-in components (CPUs, caches, memory, the Linux OS devices of NICs and disks,
// hwloc's own XML reader and writer) and, when it discovers the machine, the PCI devices;
// the other plugins cost every launch about 4 ms of CPU for objects no plan reads
// (docs/binding.md, "hwloc's plugins"). Plugins this file does not name (a site's CUDA or
// NVML ones) are still loaded.

namespace hyrun::binding {

/// True when the user configures hwloc through its environment (any HWLOC_* variable): hyrun
/// then leaves hwloc exactly as configured (no plugin choice, no topology cache).
bool hwloc_configured_by_environment();

/// What a load needs beyond hwloc's built-in components.
enum class HwlocLoad {
  kDiscovery,  // reads this machine: PCI devices too
  kXml,        // imports an XML export of this machine: nothing more
};

/// While it lives, the first topology this process creates loads only the plugins `load`
/// needs (HWLOC_PLUGINS_BLACKLIST, which hwloc reads then and only then). Does nothing when
/// the user configures hwloc (hwloc_configured_by_environment). The variable is removed on
/// destruction, so ranks never inherit it. Sets the environment: use only while no other
/// thread reads it (hyrun plans before it starts any thread).
class HwlocPluginChoice {
 public:
  explicit HwlocPluginChoice(HwlocLoad load);
  ~HwlocPluginChoice();
  HwlocPluginChoice(const HwlocPluginChoice&) = delete;
  HwlocPluginChoice& operator=(const HwlocPluginChoice&) = delete;

 private:
  bool set_ = false;
};

}  // namespace hyrun::binding
