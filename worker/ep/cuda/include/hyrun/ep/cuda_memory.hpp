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

/// Where a CudaArray's memory comes from: device memory, or page-locked host memory (staging
/// of the staged path; truly asynchronous copies).
struct DeviceMemory {
  static constexpr const char* kAllocate = "cudaMalloc";
  static cudaError_t allocate(void** p, std::size_t bytes) { return cudaMalloc(p, bytes); }
  static void release(void* p) { cudaFree(p); }
};
struct PinnedMemory {
  static constexpr const char* kAllocate = "cudaMallocHost";
  static cudaError_t allocate(void** p, std::size_t bytes) { return cudaMallocHost(p, bytes); }
  static void release(void* p) { cudaFreeHost(p); }
};

/// `n` elements of T in `Memory` (room for one at least, so that an empty array has an address).
template <class T, class Memory>
class CudaArray {
 public:
  CudaArray() = default;
  explicit CudaArray(std::size_t n) : n_(n) {
    void* p = nullptr;
    cuda_check(Memory::allocate(&p, std::max<std::size_t>(n, 1) * sizeof(T)), Memory::kAllocate);
    p_ = static_cast<T*>(p);
  }
  ~CudaArray() {
    if (p_) Memory::release(p_);
  }
  CudaArray(CudaArray&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(o.n_) {}
  CudaArray& operator=(CudaArray&& o) noexcept {
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

template <class T>
using PinnedArray = CudaArray<T, PinnedMemory>;

/// Device memory, with the copies and fills a program makes of it.
template <class T>
class DeviceArray : public CudaArray<T, DeviceMemory> {
 public:
  using CudaArray<T, DeviceMemory>::CudaArray;
  /// Copies n elements from host memory, ordered on `s`; returns when done.
  void upload(const T* src, std::size_t n, Stream s) {
    cuda_check(cudaMemcpyAsync(this->get(), src, n * sizeof(T), cudaMemcpyHostToDevice, to_cuda(s)),
               "cudaMemcpyAsync to device");
    sync(s);
  }
  void download(T* dst, std::size_t n, Stream s) const {
    cuda_check(cudaMemcpyAsync(dst, this->get(), n * sizeof(T), cudaMemcpyDeviceToHost, to_cuda(s)),
               "cudaMemcpyAsync to host");
    sync(s);
  }
  /// Every byte = value, ordered on `s` (asynchronous).
  void fill_bytes(int value, Stream s) {
    cuda_check(cudaMemsetAsync(this->get(), value, this->size() * sizeof(T), to_cuda(s)), "cudaMemsetAsync");
  }
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
