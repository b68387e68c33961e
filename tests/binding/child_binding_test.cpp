// apply_child_binding for real, in forked children of this test (this machine's topology).
#include "hyrun/binding/child_binding.hpp"

#include <gtest/gtest.h>
#include <linux/mempolicy.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "fixtures.hpp"
#include "hyrun/binding/cpu_list.hpp"

using namespace hyrun::binding;

namespace {

struct ChildResult {
  int rc = -1;
  std::string msg;
  std::string affinity;  // read in the child after applying
};

// Forks, applies `b` in the child (as the launcher will), reports rc, message and affinity.
ChildResult run_in_child(const ChildBinding& b) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    char msg[256];
    const int rc = apply_child_binding(b, msg, sizeof msg);
    cpu_set_t got;
    sched_getaffinity(0, sizeof got, &got);
    std::string aff;
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &got)) aff += std::to_string(c) + " ";
    const std::string out = std::to_string(rc) + "\n" + msg + "\n" + aff;
    (void)!write(fds[1], out.data(), out.size());
    _exit(0);
  }
  close(fds[1]);
  std::string all;
  char buf[512];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) all.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  ChildResult r;
  const auto a = all.find('\n'), b2 = all.find('\n', a + 1);
  r.rc = std::stoi(all.substr(0, a));
  r.msg = all.substr(a + 1, b2 - a - 1);
  r.affinity = all.substr(b2 + 1);
  return r;
}

int first_allowed_cpu() {
  cpu_set_t s;
  sched_getaffinity(0, sizeof s, &s);
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &s)) return c;
  return -1;
}

bool mempolicy_permitted() {
  int mode;
  unsigned long mask[ChildBinding::kNodeWords];
  return syscall(SYS_get_mempolicy, &mode, mask, ChildBinding::kMaxNumaNodes, nullptr, 0UL) == 0;
}

}  // namespace

TEST(ChildBinding, BindsToOneAllowedCpuAndReadsItBack) {
  const int cpu = first_allowed_cpu();
  ASSERT_GE(cpu, 0);
  ChildBinding b;
  b.bind_cpus = true;
  CPU_SET(cpu, &b.cpus);
  const auto r = run_in_child(b);
  EXPECT_EQ(r.rc, 0) << r.msg;
  EXPECT_EQ(r.msg, "");
  EXPECT_EQ(r.affinity, std::to_string(cpu) + " ");
}

TEST(ChildBinding, BindsMemoryToNodeZero) {
  if (!mempolicy_permitted()) GTEST_SKIP() << "get_mempolicy not permitted here";
  ChildBinding b;
  b.bind_memory = true;
  b.nodes[0] = 1;
  const auto r = run_in_child(b);
  EXPECT_EQ(r.rc, 0) << r.msg;
}

TEST(ChildBinding, ImpossibleCpuFailsWithAClearMessage) {
  ChildBinding b;
  b.bind_cpus = true;
  CPU_SET(1000, &b.cpus);  // no such CPU here
  auto r = run_in_child(b);
  EXPECT_EQ(r.rc, EINVAL);
  EXPECT_EQ(r.msg, "CPU binding to 1000 failed: errno " + std::to_string(EINVAL));
  b.warn_only = true;
  r = run_in_child(b);
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.msg.find("CPU binding to 1000 failed"), std::string::npos);
}

TEST(ChildBinding, MessageIsTruncatedSafely) {
  ChildBinding b;
  b.bind_cpus = true;
  CPU_SET(1000, &b.cpus);
  char tiny[8];
  std::memset(tiny, 'x', sizeof tiny);
  cpu_set_t before;
  sched_getaffinity(0, sizeof before, &before);
  EXPECT_EQ(apply_child_binding(b, tiny, sizeof tiny), EINVAL);  // fails before changing anything
  EXPECT_EQ(std::string(tiny), "CPU bin");
}

TEST(ChildBinding, PlanOfThisMachineAppliesInAChild) {
  BindingOptions o;
  o.gpus_per_rank = 1;
  const auto plan = BindingPlan::compute(o, 2, test::env_of());
  ASSERT_TRUE(plan.is_this_system());
  auto b = plan.child_binding(1);
  if (b.bind_memory && !mempolicy_permitted()) b.bind_memory = false;
  const auto r = run_in_child(b);
  EXPECT_EQ(r.rc, 0) << r.msg;
  std::string expected;
  for (int c : plan.ranks()[1].cpus) expected += std::to_string(c) + " ";
  EXPECT_EQ(r.affinity, expected);
}
