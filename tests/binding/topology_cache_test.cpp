// The topology cache on this machine: an entry is used only while it is this machine's and
// this user's, and a plan made from it equals one made from a fresh discovery.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "captured_log.hpp"
#include "fixtures.hpp"
#include "hyrun/binding/binding_plan.hpp"
#include "hyrun/binding/gpu_discovery.hpp"
#include "hyrun/binding/topology_cache.hpp"

using namespace hyrun::binding;
using namespace hyrun::binding::test;
namespace fs = std::filesystem;

namespace {

class TopologyCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/hyrun-topology-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    dir_ = root_ + "/cache";
  }
  void TearDown() override { fs::remove_all(root_); }

  static std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static void write(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  }
  // This machine's whole topology as XML, its host name replaced by a random marker that only
  // a topology loaded from that entry can carry.
  std::string marked_xml() {
    std::string xml = Topology::discover_whole_machine().to_xml();
    const std::string key = "<info name=\"HostName\" value=\"";
    const auto at = xml.find(key);
    EXPECT_NE(at, std::string::npos);
    const auto end = xml.find('"', at + key.size());
    marker_ = "marker-" + std::to_string(std::random_device{}());
    return xml.replace(at + key.size(), end - at - key.size(), marker_);
  }
  static std::string host_of(const Topology& t) {
    const char* v = hwloc_obj_get_info_by_name(hwloc_get_root_obj(t.get()), "HostName");
    return v ? v : "";
  }
  std::string root_, dir_, marker_;
};

// What a plan is made from, compared object by object: CPUs, NUMA nodes, PCI and OS devices.
std::string shape(const Topology& t) {
  std::ostringstream out;
  for (hwloc_obj_type_t type :
       {HWLOC_OBJ_PU, HWLOC_OBJ_CORE, HWLOC_OBJ_NUMANODE, HWLOC_OBJ_PCI_DEVICE, HWLOC_OBJ_OS_DEVICE})
    for (hwloc_obj_t o = hwloc_get_next_obj_by_type(t.get(), type, nullptr); o;
         o = hwloc_get_next_obj_by_type(t.get(), type, o)) {
      char set[256] = "";
      if (o->cpuset) hwloc_bitmap_snprintf(set, sizeof set, o->cpuset);
      out << hwloc_obj_type_string(type) << ' ' << o->os_index << ' ' << (o->name ? o->name : "") << ' ' << set << '\n';
    }
  char allowed[256] = "";
  hwloc_bitmap_snprintf(allowed, sizeof allowed, hwloc_topology_get_allowed_cpuset(t.get()));
  return out.str() + "allowed " + allowed + "\n";
}

}  // namespace

TEST_F(TopologyCacheTest, TheFirstLoadDiscoversAndStoresTheSameTopologyInAPrivateEntry) {
  const TopologyCache cache(dir_);
  const Topology fresh = Topology::load_this_system();
  const Topology first = cache.load();
  EXPECT_TRUE(first.is_this_system());
  EXPECT_EQ(shape(first), shape(fresh));

  struct stat st {};
  ASSERT_EQ(::stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(::lstat(cache.entry_path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  const std::string entry = read(cache.entry_path());
  EXPECT_EQ(entry.rfind(TopologyCache::machine_key() + "\n<?xml", 0), 0u) << entry.substr(0, 400);

  const Topology second = cache.load();
  EXPECT_TRUE(second.is_this_system());
  EXPECT_EQ(shape(second), shape(fresh));
}

TEST_F(TopologyCacheTest, AnEntryOfThisMachineIsLoadedInsteadOfDiscovering) {
  const TopologyCache cache(dir_);
  (void)cache.load();
  write(cache.entry_path(), TopologyCache::machine_key() + "\n" + marked_xml());
  const Topology t = cache.load();
  EXPECT_EQ(host_of(t), marker_);
  EXPECT_TRUE(t.is_this_system());
}

TEST_F(TopologyCacheTest, AnEntryOfAnotherBootIsReplaced) {
  const TopologyCache cache(dir_);
  (void)cache.load();
  std::string key = TopologyCache::machine_key();
  const auto boot = key.find("\nboot: ");
  ASSERT_NE(boot, std::string::npos);
  key.replace(boot + 7, 8, "00000000");
  ASSERT_NE(key, TopologyCache::machine_key());
  write(cache.entry_path(), key + "\n" + marked_xml());

  const Topology t = cache.load();
  EXPECT_NE(host_of(t), marker_);
  EXPECT_EQ(read(cache.entry_path()).rfind(TopologyCache::machine_key() + "\n<?xml", 0), 0u);
}

// An entry of this machine whose CPU sets were changed (every object given CPUs 0-1 here,
// or one processor given another's) would bind every rank as it says: it is checked against
// the kernel's CPUs and its own tree, said, discovered again and replaced.
TEST_F(TopologyCacheTest, AnEntryWhoseCpuSetsAreNotThisMachinesIsSaidAndReplaced) {
  const TopologyCache cache(dir_);
  (void)cache.load();
  const std::string whole = read(cache.entry_path());
  std::string all_same = whole, one_moved = whole;
  for (const char* attribute : {" cpuset=\"", " complete_cpuset=\"", " allowed_cpuset=\""})
    for (auto at = all_same.find(attribute); at != std::string::npos; at = all_same.find(attribute, at + 1)) {
      const auto start = at + std::strlen(attribute), end = all_same.find('"', start);
      all_same.replace(start, end - start, "0x00000003");
    }
  const auto pu = one_moved.find("type=\"PU\" os_index=\"0\" cpuset=\"");
  ASSERT_NE(pu, std::string::npos) << "no PU 0 in the entry";
  const auto set = one_moved.find("cpuset=\"", pu) + 8;
  one_moved.replace(set, one_moved.find('"', set) - set, "0x00000002");
  for (const std::string& changed : {all_same, one_moved}) {
    ASSERT_NE(changed, whole);
    write(cache.entry_path(), changed);
    hyrun::test_support::CapturedLog log;
    const Topology t = cache.load();
    EXPECT_EQ(shape(t), shape(Topology::load_this_system()));
    const auto said = log.messages();
    EXPECT_TRUE(std::any_of(said.begin(), said.end(), [](const std::string& m) {
      return m.find("was not this machine's topology") != std::string::npos;
    })) << "no warning";
    EXPECT_EQ(read(cache.entry_path()), whole);
  }
}

TEST_F(TopologyCacheTest, AMalformedOrCutEntryIsReplaced) {
  const TopologyCache cache(dir_);
  (void)cache.load();
  const std::string whole = read(cache.entry_path());
  for (const std::string& bad : {TopologyCache::machine_key() + "\nnot xml at all", whole.substr(0, whole.size() / 2),
                                 TopologyCache::machine_key(), std::string()}) {
    write(cache.entry_path(), bad);
    const Topology t = cache.load();
    EXPECT_EQ(shape(t), shape(Topology::load_this_system()));
    EXPECT_EQ(read(cache.entry_path()).rfind(TopologyCache::machine_key() + "\n<?xml", 0), 0u);
  }
}

TEST_F(TopologyCacheTest, AnEntryThatIsASymbolicLinkIsNotFollowed) {
  const TopologyCache cache(dir_);
  (void)cache.load();
  const std::string elsewhere = root_ + "/planted.xml";
  write(elsewhere, TopologyCache::machine_key() + "\n" + marked_xml());
  fs::remove(cache.entry_path());
  fs::create_symlink(elsewhere, cache.entry_path());

  EXPECT_NE(host_of(cache.load()), marker_);
  struct stat st {};
  ASSERT_EQ(::lstat(cache.entry_path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

TEST_F(TopologyCacheTest, AFifoAtTheEntryIsNotWaitedOn) {
  const TopologyCache cache(dir_);
  (void)cache.load();
  fs::remove(cache.entry_path());
  ASSERT_EQ(::mkfifo(cache.entry_path().c_str(), 0600), 0);
  EXPECT_EQ(shape(cache.load()), shape(Topology::load_this_system()));  // a blocking open would hang here
  struct stat st {};
  ASSERT_EQ(::lstat(cache.entry_path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

TEST_F(TopologyCacheTest, ADirectoryOthersCanWriteInIsNotUsed) {
  ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir_.c_str(), 0777), 0);
  const TopologyCache cache(dir_);
  write(cache.entry_path(), TopologyCache::machine_key() + "\n" + marked_xml());

  const Topology t = cache.load();
  EXPECT_NE(host_of(t), marker_);
  EXPECT_EQ(shape(t), shape(Topology::load_this_system()));
}

TEST_F(TopologyCacheTest, ADirectoryOfAnotherUserIsNotUsed) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving a directory to another user needs root";
  ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
  const TopologyCache cache(dir_);
  write(cache.entry_path(), TopologyCache::machine_key() + "\n" + marked_xml());
  ASSERT_EQ(::chown(cache.entry_path().c_str(), 65534, 65534), 0);
  ASSERT_EQ(::chown(dir_.c_str(), 65534, 65534), 0);

  EXPECT_NE(host_of(cache.load()), marker_);
}

TEST_F(TopologyCacheTest, ADirectoryThatIsASymbolicLinkIsNotUsed) {
  const std::string real = root_ + "/real";
  ASSERT_EQ(::mkdir(real.c_str(), 0700), 0);
  fs::create_symlink(real, dir_);
  const TopologyCache cache(dir_);
  write(real + "/" + fs::path(cache.entry_path()).filename().string(),
        TopologyCache::machine_key() + "\n" + marked_xml());

  EXPECT_NE(host_of(cache.load()), marker_);
}

TEST_F(TopologyCacheTest, APlanFromTheCacheEqualsAPlanFromDiscovery) {
  for (int ranks : {1, 2, 3}) {
    BindingOptions fresh;
    BindingOptions cached;
    cached.topology_cache = dir_;
    const auto expected = BindingPlan::compute(fresh, ranks, env_of()).report_json(0);
    EXPECT_EQ(BindingPlan::compute(cached, ranks, env_of()).report_json(0), expected);  // miss: stored
    EXPECT_EQ(BindingPlan::compute(cached, ranks, env_of()).report_json(0), expected);  // hit
  }
}

class TopologyCacheDirectoryTest : public ::testing::Test {
 protected:
  void TearDown() override {
    ::unsetenv(kTopologyCacheVariable);
    ::unsetenv("HWLOC_SYNTHETIC");
  }
};

TEST_F(TopologyCacheDirectoryTest, DefaultsToADirectoryOfThisUserUnderTheTemporaryRoot) {
  ::unsetenv(kTopologyCacheVariable);
  EXPECT_EQ(topology_cache_directory("/scratch"), "/scratch/hyrun-topology-" + std::to_string(::geteuid()));
}

TEST_F(TopologyCacheDirectoryTest, TheVariableNamesTheDirectoryOrTurnsItOff) {
  ::setenv(kTopologyCacheVariable, "/var/cache/me", 1);
  EXPECT_EQ(topology_cache_directory("/tmp"), "/var/cache/me");
  ::setenv(kTopologyCacheVariable, "off", 1);
  EXPECT_EQ(topology_cache_directory("/tmp"), std::nullopt);
}

TEST_F(TopologyCacheDirectoryTest, AnyHwlocVariableTurnsItOff) {
  ::unsetenv(kTopologyCacheVariable);
  ::setenv("HWLOC_SYNTHETIC", "pack:1 pu:1", 1);
  EXPECT_EQ(topology_cache_directory("/tmp"), std::nullopt);
}
