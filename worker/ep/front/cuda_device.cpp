// select_cuda_device of buffer.hpp (CUDA builds).
#include <cuda_runtime_api.h>

#include "hyrun/ep/buffer.hpp"
#include "hyrun/ep/cuda_backend.hpp"
#include "hyrun/ep/cuda_memory.hpp"

namespace hyrun::ep {

bool select_cuda_device(int local_rank, std::string* why) {
  if (!cuda::device_available(why)) return false;
  int n = 0;
  cuda::cuda_check(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
  // hyrun gives each rank its GPU(s) in CUDA_VISIBLE_DEVICES; ranks sharing one see one.
  cuda::cuda_check(cudaSetDevice(local_rank % n), "cudaSetDevice");
  return true;
}

}  // namespace hyrun::ep
