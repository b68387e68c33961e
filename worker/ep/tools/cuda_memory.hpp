#pragma once
// RAII owners of CUDA memory for the EP tools: device arrays, pinned host arrays, a
// stream, and peers' regions mapped through CUDA IPC. Errors throw hyrun::Error.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "hyrun/common/error.hpp"
#include "hyrun/ep/cuda_backend.hpp"

namespace hyrun::ep::check {

inline void cuda_check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw Error(fmt::format("CUDA: {}: {}", what, cudaGetErrorString(err)));
}

template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(std::size_t n) : n_(n) {
    cuda_check(cudaMalloc(reinterpret_cast<void**>(&p_), std::max<std::size_t>(n, 1) * sizeof(T)), "cudaMalloc");
  }
  ~DeviceArray() {
    if (p_) cudaFree(p_);
  }
  DeviceArray(DeviceArray&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(o.n_) {}
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  T* get() const { return p_; }
  std::size_t size() const { return n_; }
  void upload(const T* src, std::size_t n) {
    cuda_check(cudaMemcpy(p_, src, n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy host to device");
  }
  void download(T* dst, std::size_t n) const {
    cuda_check(cudaMemcpy(dst, p_, n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy device to host");
  }
  void fill_bytes(int value) { cuda_check(cudaMemset(p_, value, n_ * sizeof(T)), "cudaMemset"); }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

/// Page-locked host memory (the staging area of --disable-ll-nvlink).
template <class T>
class PinnedArray {
 public:
  PinnedArray() = default;
  explicit PinnedArray(std::size_t n) : n_(n) {
    cuda_check(cudaMallocHost(reinterpret_cast<void**>(&p_), std::max<std::size_t>(n, 1) * sizeof(T)), "cudaMallocHost");
  }
  ~PinnedArray() {
    if (p_) cudaFreeHost(p_);
  }
  PinnedArray(PinnedArray&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(o.n_) {}
  PinnedArray& operator=(PinnedArray&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  T* get() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

class CudaStream {
 public:
  CudaStream() { cuda_check(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreate"); }
  ~CudaStream() { cudaStreamDestroy(s_); }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t get() const { return s_; }
  cuda::Stream ep() const { return reinterpret_cast<cuda::Stream>(s_); }
  void sync() const { cuda_check(cudaStreamSynchronize(s_), "cudaStreamSynchronize"); }

 private:
  cudaStream_t s_ = nullptr;
};

/// This rank's receive region in device memory (cuda::alloc_region, zeroed).
class DeviceRegion {
 public:
  explicit DeviceRegion(const Shape& s) : p_(cuda::alloc_region(s)), bytes_(region_bytes(s)) {}
  ~DeviceRegion() {
    try {
      cuda::free_region(p_);
    } catch (const Error&) {  // nothing sensible to do while unwinding
    }
  }
  DeviceRegion(const DeviceRegion&) = delete;
  DeviceRegion& operator=(const DeviceRegion&) = delete;
  void* get() const { return p_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* p_;
  std::size_t bytes_;
};

/// A peer's region mapped into this process through CUDA IPC.
class IpcMapping {
 public:
  explicit IpcMapping(const std::vector<std::byte>& handle) : p_(cuda::open_ipc_handle(handle)) {}
  ~IpcMapping() {
    try {
      cuda::close_ipc_handle(p_);
    } catch (const Error&) {
    }
  }
  IpcMapping(const IpcMapping&) = delete;
  IpcMapping& operator=(const IpcMapping&) = delete;
  void* get() const { return p_; }

 private:
  void* p_;
};

}  // namespace hyrun::ep::check
