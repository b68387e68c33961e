// cuda-device-report: what a rank got, seen from inside it, to compare with hyrun's plan
// (hyrun --report-bindings=json). One JSON line per rank on stdout:
//
//   hyrun -n 4 --bootstrap=none -- cuda-device-report
//   {"rank":0,"cuda_visible_devices":"0","device_count":1,"pci_bus_ids":["0000:00:06.0"],
//    "cpus":"0-3","mems":"0"}
//
// pci_bus_ids: cudaDeviceGetPCIBusId of every device the rank sees, in CUDA order (the rank
// uses its first; hyrun renumbers nothing, CUDA_VISIBLE_DEVICES does). cpus / mems: the
// rank's Cpus_allowed_list / Mems_allowed_list from /proc/self/status (what binding gave).
// No worker library: it runs with --bootstrap=none under any launcher.
// Exit codes: 0, 1 a CUDA or /proc error (named), 77 no CUDA device.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "hyrun/common/env_contract.hpp"

namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

std::string status_field(const std::string& key) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.starts_with(key + ":")) {
      auto v = line.substr(key.size() + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  throw std::runtime_error(fmt::format("/proc/self/status has no {} line", key));
}

}  // namespace

int main() {
  try {
    int n = 0;
    if (const cudaError_t err = cudaGetDeviceCount(&n); err != cudaSuccess || n == 0) {
      std::fprintf(stderr, "cuda-device-report: no CUDA device (%s)\n",
                   err != cudaSuccess ? cudaGetErrorString(err) : "count 0");
      return 77;
    }
    nlohmann::json ids = nlohmann::json::array();
    for (int d = 0; d < n; ++d) {
      char bus[32] = {};
      if (const cudaError_t err = cudaDeviceGetPCIBusId(bus, sizeof bus, d); err != cudaSuccess)
        throw std::runtime_error(fmt::format("cudaDeviceGetPCIBusId({}): {}", d, cudaGetErrorString(err)));
      ids.push_back(bus);
    }
    const nlohmann::json line{{"rank", std::atoi(env_or(hyrun::env::kRank, "0").c_str())},
                              {"local_rank", std::atoi(env_or(hyrun::env::kLocalRank, "0").c_str())},
                              {"cuda_visible_devices", env_or("CUDA_VISIBLE_DEVICES", "")},
                              {"device_count", n},
                              {"pci_bus_ids", ids},
                              {"cpus", status_field("Cpus_allowed_list")},
                              {"mems", status_field("Mems_allowed_list")}};
    std::printf("%s\n", line.dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda-device-report: %s\n", e.what());
    return 1;
  }
}
