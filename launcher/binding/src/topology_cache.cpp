#include "hyrun/binding/topology_cache.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "hwloc_plugins.hpp"
#include "hyrun/binding/bitmap.hpp"
#include "hyrun/binding/cpu_list.hpp"
#include "hyrun/common/error.hpp"
#include "hyrun/common/hex.hpp"
#include "hyrun/common/random_bytes.hpp"
#include "hyrun/common/unique_dir.hpp"
#include "hyrun/common/unique_fd.hpp"
#include "hyrun/common/user_directory.hpp"

namespace hyrun::binding {
namespace {

constexpr const char* kFormat = "hyrun-topology-cache v1";
// A machine with thousands of PCI functions exports a few MiB; anything far beyond is not ours.
constexpr std::size_t kMaxEntryBytes = 64u << 20;
// The device classes whose members hwloc's Linux backend makes OS devices of.
constexpr const char* kDeviceClasses[] = {"net", "infiniband", "drm", "dma", "block", "bxi", "ve", "cxl", "dax", "mic"};

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "-";
  return line;
}

std::vector<std::string> names_in(const std::string& path) {
  std::vector<std::string> names;
  const UniqueDir dir = open_directory(path);
  if (!dir) return names;
  while (const dirent* e = ::readdir(dir.get()))
    if (e->d_name[0] != '.') names.emplace_back(e->d_name);
  std::sort(names.begin(), names.end());
  return names;
}

std::string link_target_name(const std::string& path) {
  char target[PATH_MAX];
  const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
  if (n <= 0) return "-";
  const std::string full(target, static_cast<std::size_t>(n));
  return full.substr(full.rfind('/') + 1);
}

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  std::string host(name);
  std::replace(host.begin(), host.end(), '/', '_');
  return host;
}

// The entry's content; std::nullopt when there is none this user wrote that is a plausible size.
std::optional<std::string> read_entry(int dir_fd, const std::string& name) {
  // O_NONBLOCK: a FIFO at the name must not make the launch wait (docs/security.md).
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return std::nullopt;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() ||
      static_cast<std::size_t>(st.st_size) > kMaxEntryBytes)
    return std::nullopt;
  std::string content(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::read(fd.get(), content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    done += static_cast<std::size_t>(n);
  }
  return content;
}

// Written whole under a temporary name and renamed over the entry, so that a concurrent launch
// reads the old entry or the new one, never part of one. A failure only costs the next launch
// a discovery.
void store_entry(int dir_fd, const std::string& name, const std::string& content) {
  std::array<std::byte, 8> salt{};
  fill_random(salt, "a topology cache file name");
  const std::string temporary = fmt::format(".{}.{}", name, to_hex(salt));
  UniqueFd fd(::openat(dir_fd, temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  bool written = static_cast<bool>(fd);
  for (std::size_t done = 0; written && done < content.size();) {
    const ssize_t n = ::write(fd.get(), content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    written = n > 0;
    if (written) done += static_cast<std::size_t>(n);
  }
  const int error = errno;
  fd.reset();
  if (written && ::renameat(dir_fd, temporary.c_str(), dir_fd, name.c_str()) == 0) return;
  spdlog::debug("topology cache: could not store {} ({}); the next launch discovers the topology again", name,
                std::strerror(written ? errno : error));
  ::unlinkat(dir_fd, temporary.c_str(), 0);
}

// This host's entry in the cache directory (hosts may share a TMPDIR).
std::string entry_name() { return "topology-" + host_name() + ".xml"; }

// The kernel's CPU list in `path` ("0-3,8"), or nullopt when it cannot be read.
std::optional<std::vector<int>> kernel_cpu_list(const std::string& path) {
  try {
    return parse_cpu_list(first_line(path.c_str()), path);
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::string cpus_of(hwloc_const_bitmap_t set) { return format_cpu_list(Bitmap::copy_of(set).indexes()); }

// Why `obj`'s part of a topology loaded from an entry cannot be this machine's, or "": a
// processor whose CPUs are not its own index, or an object whose CPUs are not its children's.
std::string inconsistency_below(hwloc_obj_t obj) {
  if (obj->type == HWLOC_OBJ_PU) {
    const Bitmap own = Bitmap::from_indexes({static_cast<int>(obj->os_index)});
    return hwloc_bitmap_isequal(obj->cpuset, own.get())
               ? ""
               : fmt::format("processor {} has the CPUs {}", obj->os_index, cpus_of(obj->cpuset));
  }
  if (obj->arity == 0) return "";
  Bitmap children;
  for (unsigned i = 0; i < obj->arity; ++i) {
    if (const std::string why = inconsistency_below(obj->children[i]); !why.empty()) return why;
    children.unite(obj->children[i]->cpuset);
  }
  if (hwloc_bitmap_isequal(obj->cpuset, children.get())) return "";
  return fmt::format("{} {} has the CPUs {}, its children {}", hwloc_obj_type_string(obj->type), obj->logical_index,
                     cpus_of(obj->cpuset), cpus_of(children.get()));
}

// Why a topology loaded from an entry is not this machine's, or "": its processors are not
// the online CPUs, its CPU sets disagree with each other, or a NUMA node's CPUs are not the
// kernel's. A few sysfs lines and a walk of the tree: an entry whose CPU sets were changed
// would otherwise bind every rank as it says, without a word.
std::string disagreement_with_this_machine(const Topology& t) {
  Bitmap processors;
  for (hwloc_obj_t pu = hwloc_get_next_obj_by_type(t.get(), HWLOC_OBJ_PU, nullptr); pu;
       pu = hwloc_get_next_obj_by_type(t.get(), HWLOC_OBJ_PU, pu))
    processors.unite(Bitmap::from_indexes({static_cast<int>(pu->os_index)}).get());
  if (const auto online = kernel_cpu_list("/sys/devices/system/cpu/online"); online && processors.indexes() != *online)
    return fmt::format("its processors are {}, the online CPUs {}", format_cpu_list(processors.indexes()),
                       format_cpu_list(*online));
  if (std::string why = inconsistency_below(hwloc_get_root_obj(t.get())); !why.empty()) return why;
  for (hwloc_obj_t node = hwloc_get_next_obj_by_type(t.get(), HWLOC_OBJ_NUMANODE, nullptr); node;
       node = hwloc_get_next_obj_by_type(t.get(), HWLOC_OBJ_NUMANODE, node)) {
    // A node without CPUs of its own (HBM, CXL) has its locality's CPUs in hwloc, none in sysfs.
    const auto kernel = kernel_cpu_list(fmt::format("/sys/devices/system/node/node{}/cpulist", node->os_index));
    if (kernel && !kernel->empty() && Bitmap::copy_of(node->cpuset).indexes() != *kernel)
      return fmt::format("NUMA node {} has the CPUs {}, the kernel's {}", node->os_index, cpus_of(node->cpuset),
                         format_cpu_list(*kernel));
  }
  return "";
}

}  // namespace

TopologyCache::TopologyCache(std::string directory) : directory_(std::move(directory)) {}

std::string TopologyCache::entry_path() const { return directory_ + "/" + entry_name(); }

std::string TopologyCache::machine_key() {
  std::string key =
      fmt::format("{}\nhwloc: {:#x}\nboot: {}\ncpus: {}\nnuma: {}\npci:", kFormat, hwloc_get_api_version(),
                  first_line("/proc/sys/kernel/random/boot_id"), first_line("/sys/devices/system/cpu/online"),
                  first_line("/sys/devices/system/node/online"));
  const std::string pci = "/sys/bus/pci/devices";
  for (const auto& device : names_in(pci)) key += " " + device + "=" + link_target_name(pci + "/" + device + "/driver");
  for (const char* device_class : kDeviceClasses) {
    key += fmt::format("\n{}:", device_class);
    for (const auto& name : names_in(std::string("/sys/class/") + device_class)) key += " " + name;
  }
  return key + "\n";
}

Topology TopologyCache::load() const {
  UniqueFd dir;
  try {
    // Whoever can write in it decides what topology hyrun binds with.
    dir = open_user_directory(directory_).fd;
  } catch (const Error& e) {
    spdlog::warn(
        "topology cache {}; not used, the topology is discovered at every launch (remove it, or set {} "
        "to a directory only you can write, or to off)",
        e.what(), kTopologyCacheVariable);
    return Topology::load_this_system();
  }
  const std::string name = entry_name();
  const std::string key = machine_key();
  std::string disagrees;  // why this machine's entry is not this machine's topology
  // An entry is the machine key, a blank line, then the XML.
  if (auto entry = read_entry(dir.get(), name); entry && entry->size() > key.size() + 1 &&
                                                entry->compare(0, key.size(), key) == 0 &&
                                                (*entry)[key.size()] == '\n') {
    try {
      auto topology = Topology::from_this_systems_xml(entry->substr(key.size() + 1), "this system");
      disagrees = disagreement_with_this_machine(topology);
      if (disagrees.empty()) {
        spdlog::debug("topology cache: this system's topology from {}", entry_path());
        return topology;
      }
    } catch (const Error& e) {
      spdlog::debug("topology cache: {} ({}); discovering again", entry_path(), e.what());
    }
  }
  const std::string xml = Topology::discover_whole_machine().to_xml();
  try {
    auto topology = Topology::from_this_systems_xml(xml, "this system");
    // Said only when a fresh discovery agrees with the kernel: on a machine whose topology the
    // check does not fit, every entry would disagree, and the cache then only costs a discovery.
    if (!disagrees.empty() && disagreement_with_this_machine(topology).empty())
      spdlog::warn("topology cache: {} was not this machine's topology ({}); discovered it again", entry_path(),
                   disagrees);
    store_entry(dir.get(), name, key + "\n" + xml);
    spdlog::debug("topology cache: discovered this system's topology, stored in {}", entry_path());
    return topology;
  } catch (const Error& e) {  // an export hwloc cannot read back is not stored, and costs only this discovery
    spdlog::debug("topology cache: {}; discovering without the cache", e.what());
    return Topology::load_this_system();
  }
}

std::optional<std::string> topology_cache_directory(const std::string& temporary_root) {
  if (hwloc_configured_by_environment()) return std::nullopt;
  if (const char* chosen = std::getenv(kTopologyCacheVariable); chosen && *chosen)
    return std::string(chosen) == "off" ? std::nullopt : std::optional<std::string>(chosen);
  return fmt::format("{}/hyrun-topology-{}", temporary_root, ::geteuid());
}

}  // namespace hyrun::binding
