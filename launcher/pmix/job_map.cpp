#include "hyrun/pmix/job_map.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <hwloc.h>
#include <pmix_server.h>

#include <cstdlib>
#include <memory>
#include <numeric>

#include "hyrun/common/error.hpp"
#include "hyrun/pmix/status.hpp"

namespace hyrun::pmix {
namespace {

struct FreeString {
  void operator()(char* s) const { std::free(s); }
};
using LibraryString = std::unique_ptr<char, FreeString>;

struct FreeBitmap {
  void operator()(hwloc_bitmap_t b) const { hwloc_bitmap_free(b); }
};

// What libpmix's string generators make of `cpus`: PMIX_CPUSET's and PMIX_LOCALITY_STRING's
// values ("" when the rank is not bound).
std::pair<std::string, std::string> binding_strings(const std::vector<int>& cpus) {
  if (cpus.empty()) return {};
  std::unique_ptr<hwloc_bitmap_s, FreeBitmap> bitmap(hwloc_bitmap_alloc());
  if (!bitmap) throw Error("PMIx: cannot allocate a CPU set (out of memory)");
  for (int cpu : cpus) hwloc_bitmap_set(bitmap.get(), static_cast<unsigned>(cpu));
  pmix_cpuset_t cpuset{const_cast<char*>("hwloc"), bitmap.get()};
  char* raw = nullptr;
  throw_if_failed(PMIx_server_generate_cpuset_string(&cpuset, &raw), "PMIx: describing a rank's CPU set");
  LibraryString set(raw);
  raw = nullptr;
  throw_if_failed(PMIx_server_generate_locality_string(&cpuset, &raw), "PMIx: describing a rank's locality");
  LibraryString locality(raw);
  return {set ? set.get() : "", locality ? locality.get() : ""};
}

// A regular expression of `values` as libpmix parses it back (PMIX_NODE_MAP, PMIX_PROC_MAP).
std::string regex_of(const std::string& values, bool ppn) {
  char* raw = nullptr;
  throw_if_failed(ppn ? PMIx_generate_ppn(values.c_str(), &raw) : PMIx_generate_regex(values.c_str(), &raw),
                  fmt::format("PMIx: making the {} map", ppn ? "process" : "node"));
  LibraryString regex(raw);
  return regex ? regex.get() : "";
}

void add_job_level(InfoList& info, const JobMap& map) {
  const std::uint32_t size = map.size();
  info.add(PMIX_JOBID, map.nspace);
  info.add(PMIX_UNIV_SIZE, size);
  info.add(PMIX_JOB_SIZE, size);
  info.add(PMIX_MAX_PROCS, size);
  info.add(PMIX_APP_SIZE, size);
  info.add(PMIX_JOB_NUM_APPS, std::uint32_t{1});
  info.add(PMIX_APPNUM, std::uint32_t{0});
  info.add_rank(PMIX_APPLDR, 0);
  info.add(PMIX_NUM_NODES, static_cast<std::uint32_t>(map.hosts.size()));
  info.add(PMIX_NODE_MAP, regex_of(fmt::format("{}", fmt::join(map.hosts, ",")), false));
  std::vector<std::string> per_node;
  for (const auto& ranks : map.ranks) per_node.push_back(fmt::format("{}", fmt::join(ranks, ",")));
  info.add(PMIX_PROC_MAP, regex_of(fmt::format("{}", fmt::join(per_node, ";")), true));
  if (!map.tmpdir.empty()) {
    info.add(PMIX_TMPDIR, map.tmpdir);
    info.add(PMIX_NSDIR, map.tmpdir);
  }
}

// Each node's keys in an array that names the node. A lone node-level key would be filed
// under the server's host name, and two tasks on one machine would then read each other's.
void add_node_level(InfoList& info, const JobMap& map) {
  for (std::size_t n = 0; n < map.hosts.size(); ++n) {
    const auto& local = map.ranks[n];
    InfoList node;
    node.add(PMIX_HOSTNAME, map.hosts[n]);  // first two: they say whose data the array is
    node.add(PMIX_NODEID, static_cast<std::uint32_t>(n));
    node.add(PMIX_LOCAL_SIZE, static_cast<std::uint32_t>(local.size()));
    node.add(PMIX_NODE_SIZE, static_cast<std::uint32_t>(local.size()));
    node.add(PMIX_LOCAL_PEERS, fmt::format("{}", fmt::join(local, ",")));
    if (!local.empty()) node.add_rank(PMIX_LOCALLDR, local.front());
    info.add(PMIX_NODE_INFO_ARRAY, node);
  }
}

void add_process(InfoList& info, const JobMap& map, std::size_t node, std::size_t index) {
  const std::uint32_t rank = map.ranks[node][index];
  InfoList process;
  process.add_rank(PMIX_RANK, rank);  // first: it says whose data the array is
  process.add(PMIX_LOCAL_RANK, static_cast<std::uint16_t>(index));
  process.add(PMIX_NODE_RANK, static_cast<std::uint16_t>(index));
  process.add_rank(PMIX_GLOBAL_RANK, rank);
  process.add_rank(PMIX_APP_RANK, rank);
  process.add(PMIX_APPNUM, std::uint32_t{0});
  process.add(PMIX_NODEID, static_cast<std::uint32_t>(node));
  process.add(PMIX_HOSTNAME, map.hosts[node]);
  if (node == map.node && index < map.local_cpus.size()) {
    const auto [cpuset, locality] = binding_strings(map.local_cpus[index]);
    if (!cpuset.empty()) process.add(PMIX_CPUSET, cpuset);
    if (!locality.empty()) process.add(PMIX_LOCALITY_STRING, locality);
  }
  info.add(PMIX_PROC_INFO_ARRAY, process);
}

}  // namespace

std::uint32_t JobMap::size() const {
  return std::accumulate(ranks.begin(), ranks.end(), std::uint32_t{0},
                         [](std::uint32_t n, const auto& node) { return n + static_cast<std::uint32_t>(node.size()); });
}

InfoArray namespace_info(const JobMap& map) {
  if (map.hosts.size() != map.ranks.size() || map.node >= map.hosts.size())
    throw Error(fmt::format("PMIx job map of {}: {} hosts for {} nodes, this node {}", map.nspace, map.hosts.size(),
                            map.ranks.size(), map.node));
  InfoList info;
  add_job_level(info, map);
  add_node_level(info, map);
  for (std::size_t node = 0; node < map.ranks.size(); ++node)
    for (std::size_t index = 0; index < map.ranks[node].size(); ++index) add_process(info, map, node, index);
  return info.to_array();
}

}  // namespace hyrun::pmix
