#include "hyrun/ep/cuda_memory.hpp"

#include <cstring>

namespace hyrun::ep::cuda {

DeviceRegion::~DeviceRegion() {
  // Kernels of any stream may still write into the region (bounded waits): let them end.
  cudaDeviceSynchronize();
  cudaFree(p_);
}

std::vector<std::byte> DeviceRegion::ipc_handle() const {
  cudaIpcMemHandle_t h;
  cuda_check(cudaIpcGetMemHandle(&h, p_), "cudaIpcGetMemHandle");
  std::vector<std::byte> out(sizeof h);
  std::memcpy(out.data(), &h, sizeof h);
  return out;
}

IpcMapping::IpcMapping(const std::vector<std::byte>& handle) {
  cudaIpcMemHandle_t h;
  if (handle.size() != sizeof h)
    throw Error(fmt::format("CUDA IPC handle has {} bytes, expected {}", handle.size(), sizeof h));
  std::memcpy(&h, handle.data(), sizeof h);
  cuda_check(cudaIpcOpenMemHandle(&p_, h, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle of a peer's region");
}

IpcMapping::~IpcMapping() {
  if (p_) cudaIpcCloseMemHandle(p_);
}

}  // namespace hyrun::ep::cuda
