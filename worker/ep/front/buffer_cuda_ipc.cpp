// Buffer path kCudaIpc: the CUDA backend storing straight into the peers' regions,
// mapped through CUDA IPC (ranks of one node). Descriptor: the region's IPC handle.
#include <ucp/api/ucp.h>

#include <map>
#include <memory>

#include "buffer_path.hpp"
#include "hyrun/ep/cuda_backend.hpp"
#include "hyrun/ep/cuda_memory.hpp"

namespace hyrun::ep {
namespace {

class CudaIpcPath final : public Buffer::Path {
 public:
  CudaIpcPath(World& world, const BufferOptions& o)
      : world_(world), max_shape_(o.shape), shape_(o.shape), timeout_(o.timeout), region_(o.shape) {
    if (world.num_nodes() > 1)
      throw UsageError("EP CUDA IPC needs every rank on one node; use the staged path (--disable-ll-nvlink)");
    std::vector<void*> regions(static_cast<std::size_t>(world.size()), nullptr);
    regions[static_cast<std::size_t>(world.rank())] = region_.get();
    if (o.attach == PeerAttach::kCollective) {
      const auto handles = world.allgatherv(region_.ipc_handle());
      for (int r = 0; r < world.size(); ++r) {
        if (r == world.rank()) continue;
        auto m = std::make_unique<cuda::IpcMapping>(handles[static_cast<std::size_t>(r)]);
        regions[static_cast<std::size_t>(r)] = m->get();
        mappings_[r] = std::move(m);
      }
    }
    backend_ = std::make_unique<cuda::CudaBackend>(shape_, world.rank(), regions, timeout_);
  }

  ~CudaIpcPath() override {
    // The backend's kernels end (bounded) before the mappings close and the region is freed.
    backend_.reset();
    mappings_.clear();
  }

  Backend backend() const override { return Backend::kCudaIpc; }
  const Shape& shape() const override { return shape_; }
  CUstream_st* stream() const override { return backend_->stream(); }
  std::vector<std::byte> local_descriptor() const override { return region_.ipc_handle(); }

  void attach_peer(int peer, std::span<const std::byte> descriptor) override {
    auto m = std::make_unique<cuda::IpcMapping>(std::vector<std::byte>(descriptor.begin(), descriptor.end()));
    backend_->set_peer_region(peer, m->get());  // synchronizes: no kernel uses the old mapping after this
    mappings_[peer] = std::move(m);             // closes the old mapping (a replaced peer)
  }

  void detach_peer(int peer) override {
    backend_->set_peer_region(peer, nullptr);
    mappings_.erase(peer);
  }

  uint64_t epoch() const override { return backend_->epoch(); }
  void set_epoch(uint64_t epoch) override { backend_->set_epoch(epoch); }

  void rearm(const Shape& shape, std::chrono::milliseconds timeout) override {
    check_rearm_shape(shape, max_shape_);
    std::vector<void*> regions(static_cast<std::size_t>(world_.size()), nullptr);
    regions[static_cast<std::size_t>(world_.rank())] = region_.get();
    for (const auto& [r, m] : mappings_) regions[static_cast<std::size_t>(r)] = m->get();
    backend_.reset();
    world_.barrier();  // nobody still reads or writes the old layout
    shape_ = shape;
    timeout_ = timeout;
    backend_ = std::make_unique<cuda::CudaBackend>(shape_, world_.rank(), regions, timeout_);
    cuda::cuda_check(cudaMemsetAsync(region_.get(), 0, std::min(region_.bytes(), region_bytes(shape_)),
                                     cuda::to_cuda(backend_->stream())),
                     "cudaMemsetAsync of the EP region");
    cuda::sync(backend_->stream());
    world_.barrier();  // nobody writes before every region is zero
  }

  void launch_dispatch(const uint16_t* x, const int64_t* topk_idx, int num_tokens, const Routing& routing, Format f,
                       const DispatchOutput& out) override {
    backend_->dispatch_send(x, topk_idx, num_tokens, routing, f);
    backend_->dispatch_recv(out);
  }

  void launch_combine(const uint16_t* expert_out, const DispatchOutput& handle, const int64_t* topk_idx,
                      const float* topk_weights, int num_tokens, uint16_t* out) override {
    backend_->combine_send(expert_out, handle);
    backend_->combine_recv(topk_idx, topk_weights, num_tokens, out);
  }

  void synchronize() override {
    // The worker library learns of a dead peer from UCX (its endpoint fails); the device
    // wait for that peer then ends at once instead of at the timeout.
    backend_->synchronize([this](int peer) {
      ucp_worker_progress(world_.ucp_worker());
      return world_.peer_failed(peer);
    });
  }

  void close_peers() override {
    // Every kernel that could still use a mapping ends first (bounded waits).
    cuda::sync(backend_->stream());
    for (auto& [r, m] : mappings_) backend_->set_peer_region(r, nullptr);
    mappings_.clear();
  }

  void fill_region(uint8_t value) override {
    cuda::cuda_check(cudaMemsetAsync(region_.get(), value, region_.bytes(), cuda::to_cuda(backend_->stream())),
                     "cudaMemsetAsync of the EP region");
    cuda::sync(backend_->stream());
  }

  std::size_t region_bytes_not(uint8_t value) override {
    std::vector<uint8_t> host(region_.bytes());
    cuda::cuda_check(cudaMemcpyAsync(host.data(), region_.get(), host.size(), cudaMemcpyDeviceToHost,
                                     cuda::to_cuda(backend_->stream())),
                     "cudaMemcpyAsync of the EP region");
    cuda::sync(backend_->stream());
    std::size_t n = 0;
    for (uint8_t b : host) n += b != value;
    return n;
  }

 private:
  World& world_;
  Shape max_shape_, shape_;
  std::chrono::milliseconds timeout_;
  cuda::DeviceRegion region_;  // declared before the backend and mappings: freed last
  std::map<int, std::unique_ptr<cuda::IpcMapping>> mappings_;
  std::unique_ptr<cuda::CudaBackend> backend_;
};

}  // namespace

std::unique_ptr<Buffer::Path> make_cuda_ipc_path(World& world, const BufferOptions& options) {
  return std::make_unique<CudaIpcPath>(world, options);
}

}  // namespace hyrun::ep
