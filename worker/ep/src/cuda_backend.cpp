#include "hyrun/ep/cuda_backend.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstring>

#include "cuda_kernels.hpp"

namespace hyrun::ep::cuda {

namespace {
void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw Error(fmt::format("CUDA: {}: {}", what, cudaGetErrorString(err)));
}
cudaStream_t st(Stream s) { return reinterpret_cast<cudaStream_t>(s); }
}  // namespace

bool device_available(std::string* why) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    if (why) *why = fmt::format("no CUDA device: cudaGetDeviceCount: {}", cudaGetErrorString(err));
    cudaGetLastError();  // clear the sticky-free error
    return false;
  }
  if (n == 0) {
    if (why) *why = "no CUDA device: cudaGetDeviceCount returned 0";
    return false;
  }
  return true;
}

void cast_fp8(const uint16_t* x, int rows, int hidden, uint8_t* q, float* scales, Stream stream) {
  if (hidden % kScaleBlock != 0) throw UsageError(fmt::format("cast_fp8: hidden {} is not a multiple of 128", hidden));
  check(detail::launch_cast_fp8(x, rows, hidden, q, scales, st(stream)), "cast_fp8 kernel launch");
}

std::vector<std::byte> ipc_handle(void* device_region) {
  cudaIpcMemHandle_t h;
  check(cudaIpcGetMemHandle(&h, device_region), "cudaIpcGetMemHandle");
  std::vector<std::byte> out(sizeof h);
  std::memcpy(out.data(), &h, sizeof h);
  return out;
}

void* open_ipc_handle(const std::vector<std::byte>& handle) {
  cudaIpcMemHandle_t h;
  if (handle.size() != sizeof h)
    throw Error(fmt::format("CUDA IPC handle has {} bytes, expected {}", handle.size(), sizeof h));
  std::memcpy(&h, handle.data(), sizeof h);
  void* p = nullptr;
  check(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle");
  return p;
}

void close_ipc_handle(void* mapped) { check(cudaIpcCloseMemHandle(mapped), "cudaIpcCloseMemHandle"); }

void* alloc_region(const Shape& shape) {
  const std::size_t n = region_bytes(shape);
  void* p = nullptr;
  check(cudaMalloc(&p, n), "cudaMalloc of the EP receive region");
  check(cudaMemset(p, 0, n), "cudaMemset of the EP receive region");
  return p;
}
void free_region(void* region) { check(cudaFree(region), "cudaFree of the EP receive region"); }

CudaBackend::CudaBackend(const Shape& shape, int rank, const std::vector<void*>& peer_regions,
                         std::chrono::milliseconds timeout)
    : shape_(shape), rank_(rank), num_peers_(static_cast<int>(peer_regions.size())), timeout_(timeout),
      layout_(region_layout(shape)) {
  if (num_peers_ < 1 || num_peers_ > shape_.max_ranks)
    throw UsageError(fmt::format("EP CUDA backend: {} peer regions, expected 1..max_ranks={}", num_peers_,
                                 shape_.max_ranks));
  if (rank_ < 0 || rank_ >= num_peers_)
    throw UsageError(fmt::format("EP CUDA backend: rank {} outside [0, {})", rank_, num_peers_));
  if (shape_.topk > kMaxTopk)
    throw UsageError(fmt::format("EP CUDA backend: topk {} exceeds the kernels' limit {}", shape_.topk, kMaxTopk));
  const std::size_t R = shape_.max_ranks;
  check(cudaMalloc(reinterpret_cast<void**>(&d_regions_), sizeof(void*) * num_peers_), "cudaMalloc");
  check(cudaMemcpy(d_regions_, peer_regions.data(), sizeof(void*) * num_peers_, cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMalloc(reinterpret_cast<void**>(&d_active_), R), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&d_slot_), sizeof(int32_t) * shape_.max_tokens * shape_.topk),
        "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&d_counts_), sizeof(int32_t) * R * shape_.experts_per_rank), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&d_missing_), sizeof(int32_t) * R), "cudaMalloc");
  check(cudaMemset(d_missing_, 0, sizeof(int32_t) * R), "cudaMemset");
  active_host_.assign(R, 0);
  peer_regions_ = peer_regions;
}

CudaBackend::~CudaBackend() {
  for (void* p : {static_cast<void*>(d_regions_), static_cast<void*>(d_active_), static_cast<void*>(d_slot_),
                  static_cast<void*>(d_counts_), static_cast<void*>(d_missing_)})
    if (p) cudaFree(p);
}

namespace {
detail::Params params_of(const Shape& s, const RegionLayout& l, int rank, const Routing& r) {
  detail::Params p;
  p.rank = rank;
  p.num_ranks = r.num_ranks;
  p.max_ranks = s.max_ranks;
  p.T = s.max_tokens;
  p.H = s.hidden;
  p.K = s.topk;
  p.E = s.experts_per_rank;
  p.slot_bytes = l.slot_bytes;
  p.off_dispatch = l.dispatch_data;
  p.off_counts = l.dispatch_counts;
  p.off_combine = l.combine_data;
  p.off_dsig = l.dispatch_signals;
  p.off_csig = l.combine_signals;
  return p;
}
}  // namespace

void CudaBackend::dispatch_send(const uint16_t* x, const int64_t* topk_idx, int num_tokens, const Routing& routing,
                                Format f, Stream stream) {
  const Shape& s = shape_;
  if (num_tokens < 0 || num_tokens > s.max_tokens)
    throw UsageError(fmt::format("EP dispatch: num_tokens={} outside [0, max_tokens={}]", num_tokens, s.max_tokens));
  if (routing.num_ranks < 1 || routing.num_ranks > num_peers_)
    throw UsageError(fmt::format("EP dispatch: routing.num_ranks={} outside [1, peer regions={}]", routing.num_ranks,
                                 num_peers_));
  if (!routing.active.empty() && static_cast<int>(routing.active.size()) != routing.num_ranks)
    throw UsageError(fmt::format("EP dispatch: routing.active has {} entries, num_ranks is {}", routing.active.size(),
                                 routing.num_ranks));
  if (!routing.is_active(rank_)) throw UsageError(fmt::format("EP dispatch: rank {} is not active", rank_));
  ++epoch_;
  routing_ = routing;
  format_ = f;
  std::fill(active_host_.begin(), active_host_.end(), 0);
  for (int r = 0; r < routing.num_ranks; ++r) active_host_[r] = routing.is_active(r) ? 1 : 0;
  const auto p = params_of(s, layout_, rank_, routing_);
  check(cudaMemcpyAsync(d_active_, active_host_.data(), active_host_.size(), cudaMemcpyHostToDevice, st(stream)),
        "cudaMemcpyAsync of the active mask");
  check(cudaMemsetAsync(d_slot_, 0xFF, sizeof(int32_t) * s.max_tokens * s.topk, st(stream)), "cudaMemsetAsync");
  check(detail::launch_count(p, topk_idx, num_tokens, d_active_, d_slot_, d_counts_, st(stream)), "count kernel");
  check(detail::launch_dispatch(p, d_regions_, x, topk_idx, d_slot_, num_tokens, f == Format::kFP8, st(stream)),
        "dispatch kernel");
  check(detail::launch_signal(p, d_regions_, d_active_, d_counts_, layout_.dispatch_signals, epoch_, st(stream)),
        "dispatch signal kernel");
}

void CudaBackend::dispatch_recv(const DispatchOutput& out, Stream stream) {
  const auto p = params_of(shape_, layout_, rank_, routing_);
  const auto ns = static_cast<unsigned long long>(std::chrono::nanoseconds(timeout_).count());
  check(detail::launch_wait(p, region_of_self(), d_active_, layout_.dispatch_signals, epoch_, ns, d_missing_,
                            st(stream)),
        "dispatch wait kernel");
  const detail::DevOut o{out.recv_x, out.recv_scales, out.recv_src_token, out.recv_src_topk, out.layout_count,
                         out.recv_count};
  check(detail::launch_unpack(p, region_of_self(), d_active_, d_missing_, format_ == Format::kFP8, o, st(stream)),
        "unpack kernel");
}

void CudaBackend::combine_send(const uint16_t* expert_out, const DispatchOutput& handle, Stream stream) {
  const auto p = params_of(shape_, layout_, rank_, routing_);
  check(detail::launch_combine_send(p, d_regions_, d_active_, handle.layout_count, handle.recv_src_token,
                                    handle.recv_src_topk, expert_out, st(stream)),
        "combine send kernel");
  check(detail::launch_signal(p, d_regions_, d_active_, nullptr, layout_.combine_signals, epoch_, st(stream)),
        "combine signal kernel");
}

void CudaBackend::combine_recv(const int64_t* topk_idx, const float* topk_weights, int num_tokens, uint16_t* out,
                               Stream stream) {
  if (num_tokens < 0 || num_tokens > shape_.max_tokens)
    throw UsageError(fmt::format("EP combine: num_tokens={} outside [0, max_tokens={}]", num_tokens, shape_.max_tokens));
  const auto p = params_of(shape_, layout_, rank_, routing_);
  const auto ns = static_cast<unsigned long long>(std::chrono::nanoseconds(timeout_).count());
  check(detail::launch_wait(p, region_of_self(), d_active_, layout_.combine_signals, epoch_, ns, d_missing_,
                            st(stream)),
        "combine wait kernel");
  check(detail::launch_combine_reduce(p, region_of_self(), topk_idx, topk_weights, d_active_, num_tokens, out,
                                      st(stream)),
        "combine reduce kernel");
}

std::vector<int> CudaBackend::missing_ranks(Stream stream) {
  check(cudaStreamSynchronize(st(stream)), "cudaStreamSynchronize");
  std::vector<int32_t> m(static_cast<std::size_t>(shape_.max_ranks));
  check(cudaMemcpy(m.data(), d_missing_, sizeof(int32_t) * m.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
  std::vector<int> out;
  for (int r = 0; r < shape_.max_ranks; ++r)
    if (m[r]) out.push_back(r);
  return out;
}

void CudaBackend::throw_if_missing(Stream stream) {
  const auto m = missing_ranks(stream);
  if (!m.empty())
    throw PeerTimeoutError(fmt::format("EP CUDA (epoch {}): rank {} got no completion signal from rank(s) {} within {} ms",
                                       epoch_, rank_, format_ranks(m), timeout_.count()),
                           m);
}

}  // namespace hyrun::ep::cuda
