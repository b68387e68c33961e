// Reads back where this rank actually runs: the kernel's view, not hyrun's plan, so a
// user (and the tests) can compare the two.
#include <fmt/format.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>

#include "hyrun/worker.hpp"

namespace hyrun {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::vector<int> memory_policy_nodes() {
  constexpr unsigned long kMaxNodes = 1024;
  unsigned long mask[kMaxNodes / (8 * sizeof(unsigned long))] = {};
  int mode = 0;
  if (syscall(SYS_get_mempolicy, &mode, mask, kMaxNodes, nullptr, 0UL) != 0) return {};
  if (mode == MPOL_DEFAULT) return {};
  std::vector<int> nodes;
  for (unsigned long n = 0; n < kMaxNodes; ++n)
    if (mask[n / (8 * sizeof(unsigned long))] & (1UL << (n % (8 * sizeof(unsigned long)))))
      nodes.push_back(static_cast<int>(n));
  return nodes;
}

}  // namespace

std::string RankBinding::describe() const {
  return fmt::format("cpus={} mem={} gpus={} ucx_net_devices={} ucx_tls={}", format_index_list(cpus),
                     memory_nodes.empty() ? "any" : format_index_list(memory_nodes),
                     visible_gpus.empty() ? "none" : visible_gpus, ucx_net_devices.empty() ? "auto" : ucx_net_devices,
                     ucx_tls.empty() ? "auto" : ucx_tls);
}

RankBinding World::binding() const {
  RankBinding b;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set)) b.cpus.push_back(cpu);
  b.memory_nodes = memory_policy_nodes();
  b.visible_gpus = env_or_empty("CUDA_VISIBLE_DEVICES");
  b.ucx_net_devices = env_or_empty("UCX_NET_DEVICES");
  b.ucx_tls = env_or_empty("UCX_TLS");
  return b;
}

}  // namespace hyrun
