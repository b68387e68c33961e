#pragma once
// RAII owners of CUDA memory for the EP library and its programs (needs the CUDA
// runtime headers; library hyrun_ep_cuda): device arrays, pinned host arrays, a rank's
// receive region exported for CUDA IPC, and a peer's region mapped through CUDA IPC.
// Errors throw hyrun::Error naming the CUDA call. Copies and fills take the stream they
// are ordered on (a backend's one stream) and return when they are done.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "hyrun/common/error.hpp"
#include "hyrun/ep/cuda_backend.hpp"
#include "hyrun/ep/layout.hpp"

namespace hyrun::ep::cuda {

inline void cuda_check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw Error(fmt::format("CUDA: {}: {}", what, cudaGetErrorString(err)));
}
inline cudaStream_t to_cuda(Stream s) { return reinterpret_cast<cudaStream_t>(s); }
inline void sync(Stream s) { cuda_check(cudaStreamSynchronize(to_cuda(s)), "cudaStreamSynchronize"); }

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
  /// Copies n elements from host memory, ordered on `s`; returns when done.
  void upload(const T* src, std::size_t n, Stream s) {
    cuda_check(cudaMemcpyAsync(p_, src, n * sizeof(T), cudaMemcpyHostToDevice, to_cuda(s)),
               "cudaMemcpyAsync to device");
    sync(s);
  }
  void download(T* dst, std::size_t n, Stream s) const {
    cuda_check(cudaMemcpyAsync(dst, p_, n * sizeof(T), cudaMemcpyDeviceToHost, to_cuda(s)), "cudaMemcpyAsync to host");
    sync(s);
  }
  /// Every byte = value, ordered on `s` (asynchronous).
  void fill_bytes(int value, Stream s) {
    cuda_check(cudaMemsetAsync(p_, value, n_ * sizeof(T), to_cuda(s)), "cudaMemsetAsync");
  }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

/// Page-locked host memory (staging of the staged path; truly asynchronous copies).
template <class T>
class PinnedArray {
 public:
  PinnedArray() = default;
  explicit PinnedArray(std::size_t n) : n_(n) {
    cuda_check(cudaMallocHost(reinterpret_cast<void**>(&p_), std::max<std::size_t>(n, 1) * sizeof(T)),
               "cudaMallocHost");
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

/// A non-blocking stream of its own (programs' own work; a backend has its own).
class CudaStream {
 public:
  CudaStream() { cuda_check(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"); }
  ~CudaStream() { cudaStreamDestroy(s_); }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t get() const { return s_; }
  Stream ep() const { return reinterpret_cast<Stream>(s_); }
  void sync() const { cuda_check(cudaStreamSynchronize(s_), "cudaStreamSynchronize"); }

 private:
  cudaStream_t s_ = nullptr;
};

/// This rank's receive region in device memory (alloc_region: zeroed), exportable to
/// the peers of the node through CUDA IPC.
class DeviceRegion {
 public:
  explicit DeviceRegion(const Shape& s) : p_(alloc_region(s)), bytes_(region_bytes(s)) {}
  ~DeviceRegion();
  DeviceRegion(const DeviceRegion&) = delete;
  DeviceRegion& operator=(const DeviceRegion&) = delete;
  void* get() const { return p_; }
  std::size_t bytes() const { return bytes_; }
  /// CUDA IPC handle (64 bytes) of the region, to send to the peers.
  std::vector<std::byte> ipc_handle() const;

 private:
  void* p_;
  std::size_t bytes_;
};

/// A peer's region mapped into this process through CUDA IPC (closed on destruction).
/// A restarted peer exports a new handle: map it with a new IpcMapping, drop the old.
class IpcMapping {
 public:
  explicit IpcMapping(const std::vector<std::byte>& handle);
  ~IpcMapping();
  IpcMapping(const IpcMapping&) = delete;
  IpcMapping& operator=(const IpcMapping&) = delete;
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
};

}  // namespace hyrun::ep::cuda
