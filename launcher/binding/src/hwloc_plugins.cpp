#include "hwloc_plugins.hpp"

#include <stdlib.h>

#include <cstring>

extern char** environ;

namespace hyrun::binding {
namespace {

constexpr const char* kBlacklist = "HWLOC_PLUGINS_BLACKLIST";
// hwloc's own XML reader and writer replace libxml2's; OpenCL and GL devices are in no plan.
constexpr const char* kUnusedOnDiscovery = "hwloc_xml_libxml,hwloc_opencl,hwloc_gl";
constexpr const char* kUnusedOnXml = "hwloc_xml_libxml,hwloc_opencl,hwloc_gl,hwloc_pci";

}  // namespace

bool hwloc_configured_by_environment() {
  for (char** variable = environ; variable && *variable; ++variable)
    if (std::strncmp(*variable, "HWLOC_", 6) == 0) return true;
  return false;
}

HwlocPluginChoice::HwlocPluginChoice(HwlocLoad load) {
  if (hwloc_configured_by_environment()) return;
  set_ = ::setenv(kBlacklist, load == HwlocLoad::kXml ? kUnusedOnXml : kUnusedOnDiscovery, 1) == 0;
}

HwlocPluginChoice::~HwlocPluginChoice() {
  if (set_) ::unsetenv(kBlacklist);
}

}  // namespace hyrun::binding
