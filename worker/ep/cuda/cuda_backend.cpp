#include "hyrun/ep/cuda_backend.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "cuda_kernels.hpp"
#include "hyrun/common/error.hpp"

namespace hyrun::ep::cuda {

namespace {
void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw Error(fmt::format("CUDA: {}: {}", what, cudaGetErrorString(err)));
}
cudaStream_t st(Stream s) { return reinterpret_cast<cudaStream_t>(s); }

constexpr int kErrorWords = sizeof(detail::DeviceError) / sizeof(int32_t);

const char* error_field(int32_t code) {
  switch (code) {
    case detail::kErrMagic: return "magic (a stale slot, another epoch or format, or not a message)";
    case detail::kErrSource: return "source rank";
    case detail::kErrToken: return "source token (outside [0, max_tokens))";
    case detail::kErrTopk: return "top-k slot (outside [0, topk))";
    case detail::kErrHandle: return "combine handle row (source token or top-k out of bounds)";
    default: return "unknown";
  }
}
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

uint64_t fp8_conversion_mismatches(uint32_t* first) {
  struct Result {
    unsigned long long mismatches;
    uint32_t first;
  };
  Result* d = nullptr;
  check(cudaMalloc(reinterpret_cast<void**>(&d), sizeof(Result)), "cudaMalloc");
  Result h{0, 0xFFFFFFFFu};
  cudaError_t err = cudaMemcpy(d, &h, sizeof h, cudaMemcpyHostToDevice);
  if (err == cudaSuccess) err = detail::launch_fp8_conversion_check(&d->mismatches, &d->first, nullptr);
  if (err == cudaSuccess) err = cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
  cudaFree(d);
  check(err, "the FP8 conversion check");
  if (first != nullptr) *first = h.first;
  return h.mismatches;
}

void* alloc_region(const Shape& shape) {
  const std::size_t n = region_bytes(shape);
  void* p = nullptr;
  check(cudaMalloc(&p, n), "cudaMalloc of the EP receive region");
  const cudaError_t err = cudaMemset(p, 0, n);
  if (err != cudaSuccess) {
    cudaFree(p);
    check(err, "cudaMemset of the EP receive region");
  }
  check(cudaDeviceSynchronize(), "zeroing the EP receive region");  // zero before any peer may write
  return p;
}
void free_region(void* region) { check(cudaFree(region), "cudaFree of the EP receive region"); }

CudaBackend::CudaBackend(const Shape& shape, int rank, const std::vector<void*>& peer_regions,
                         std::chrono::milliseconds timeout)
    : shape_(shape),
      rank_(rank),
      num_peers_(static_cast<int>(peer_regions.size())),
      timeout_(timeout),
      layout_(region_layout(shape)) {
  if (num_peers_ < 1 || num_peers_ > shape_.max_ranks)
    throw UsageError(
        fmt::format("EP CUDA backend: {} peer regions, expected 1..max_ranks={}", num_peers_, shape_.max_ranks));
  if (rank_ < 0 || rank_ >= num_peers_)
    throw UsageError(fmt::format("EP CUDA backend: rank {} outside [0, {})", rank_, num_peers_));
  if (peer_regions[static_cast<std::size_t>(rank_)] == nullptr)
    throw UsageError(fmt::format("EP CUDA backend: rank {} has no region of its own", rank_));
  if (shape_.topk > kMaxTopk)
    throw UsageError(fmt::format("EP CUDA backend: topk {} exceeds the kernels' limit {}", shape_.topk, kMaxTopk));
  if (shape_.max_ranks > kMaxRanks)
    throw UsageError(
        fmt::format("EP CUDA backend: max_ranks {} exceeds the kernels' limit {}", shape_.max_ranks, kMaxRanks));
  const std::size_t R = static_cast<std::size_t>(shape_.max_ranks);
  peer_regions_ = peer_regions;
  host_mask_.assign(R, 0);
  for (int r = 0; r < num_peers_; ++r)
    if (peer_regions_[static_cast<std::size_t>(r)] == nullptr) host_mask_[static_cast<std::size_t>(r)] = 1;
  // Whatever fails below, the destructor is not run: free what was allocated so far.
  try {
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    stream_ = reinterpret_cast<Stream>(s);
    check(cudaMalloc(reinterpret_cast<void**>(&d_regions_), sizeof(void*) * R), "cudaMalloc");
    check(cudaMalloc(reinterpret_cast<void**>(&d_active_), R), "cudaMalloc");
    check(cudaMalloc(reinterpret_cast<void**>(&d_live_), R), "cudaMalloc");
    check(cudaMalloc(reinterpret_cast<void**>(&d_mask_), sizeof(int32_t) * R), "cudaMalloc");
    check(cudaMalloc(reinterpret_cast<void**>(&d_status_), sizeof(int32_t) * (kErrorWords + R)), "cudaMalloc");
    check(cudaMalloc(reinterpret_cast<void**>(&d_slot_), sizeof(int32_t) * shape_.max_tokens * shape_.topk),
          "cudaMalloc");
    check(cudaMalloc(reinterpret_cast<void**>(&d_counts_), sizeof(int32_t) * R * shape_.experts_per_rank),
          "cudaMalloc");
    check(cudaMalloc(reinterpret_cast<void**>(&d_counters_), sizeof(int32_t) * (2 + shape_.experts_per_rank)),
          "cudaMalloc");
    check(cudaHostAlloc(reinterpret_cast<void**>(&h_failed_), sizeof(int32_t) * R, cudaHostAllocMapped),
          "cudaHostAlloc of the failed-peer words");
    check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&d_failed_), h_failed_, 0), "cudaHostGetDevicePointer");
    const std::size_t stage = std::max(sizeof(void*) * R, sizeof(int32_t) * (kErrorWords + R));
    check(cudaHostAlloc(reinterpret_cast<void**>(&h_stage_), stage, cudaHostAllocDefault), "cudaHostAlloc");
    std::memset(h_failed_, 0, sizeof(int32_t) * R);
    std::memset(h_stage_, 0, stage);
    std::memcpy(h_stage_, peer_regions_.data(), sizeof(void*) * num_peers_);
    check(cudaMemcpyAsync(d_regions_, h_stage_, sizeof(void*) * R, cudaMemcpyHostToDevice, st(stream_)),
          "cudaMemcpyAsync of the peer table");
    check(cudaMemsetAsync(d_active_, 0, R, st(stream_)), "cudaMemsetAsync");
    check(cudaMemsetAsync(d_live_, 0, R, st(stream_)), "cudaMemsetAsync");
    check(cudaMemsetAsync(d_status_, 0, sizeof(int32_t) * (kErrorWords + R), st(stream_)), "cudaMemsetAsync");
    check(cudaMemsetAsync(d_counters_, 0, sizeof(int32_t) * (2 + shape_.experts_per_rank), st(stream_)),
          "cudaMemsetAsync");
    check(cudaStreamSynchronize(st(stream_)), "cudaStreamSynchronize");  // h_stage_ is reused below
    std::vector<int32_t> mask(R, 0);
    for (std::size_t r = 0; r < R; ++r) mask[r] = host_mask_[r];
    std::memcpy(h_stage_, mask.data(), sizeof(int32_t) * R);
    check(cudaMemcpyAsync(d_mask_, h_stage_, sizeof(int32_t) * R, cudaMemcpyHostToDevice, st(stream_)),
          "cudaMemcpyAsync of the mask");
    check(cudaStreamSynchronize(st(stream_)), "cudaStreamSynchronize");
  } catch (...) {
    release();
    throw;
  }
}

CudaBackend::~CudaBackend() { release(); }

void CudaBackend::release() noexcept {
  // Kernels may still wait for peers (bounded by the timeout); memory they use must
  // outlive them.
  if (stream_) cudaStreamSynchronize(st(stream_));
  for (void* p : {static_cast<void*>(d_regions_), static_cast<void*>(d_active_), static_cast<void*>(d_live_),
                  static_cast<void*>(d_mask_), static_cast<void*>(d_status_), static_cast<void*>(d_slot_),
                  static_cast<void*>(d_counts_), static_cast<void*>(d_counters_)})
    if (p) cudaFree(p);
  if (h_failed_) cudaFreeHost(h_failed_);
  if (h_stage_) cudaFreeHost(h_stage_);
  if (stream_) cudaStreamDestroy(st(stream_));
  d_regions_ = nullptr, d_active_ = nullptr, d_live_ = nullptr, d_mask_ = nullptr, d_status_ = nullptr;
  d_slot_ = nullptr, d_counts_ = nullptr, d_counters_ = nullptr, h_failed_ = nullptr, h_stage_ = nullptr,
  stream_ = nullptr;
}

void CudaBackend::check_rank(int r, const char* what) const {
  if (r < 0 || r >= num_peers_ || r == rank_)
    throw UsageError(
        fmt::format("EP CUDA backend: {}: rank {} is not a peer (0..{}, not {})", what, r, num_peers_ - 1, rank_));
}

void CudaBackend::set_peer_region(int r, void* region) {
  check_rank(r, "set_peer_region");
  check(cudaStreamSynchronize(st(stream_)), "cudaStreamSynchronize");
  peer_regions_[static_cast<std::size_t>(r)] = region;
  std::memcpy(h_stage_, &region, sizeof region);
  check(cudaMemcpyAsync(d_regions_ + r, h_stage_, sizeof region, cudaMemcpyHostToDevice, st(stream_)),
        "cudaMemcpyAsync of a peer region");
  check(cudaStreamSynchronize(st(stream_)), "cudaStreamSynchronize");
  if (region == nullptr)
    mask_peer(r);
  else
    unmask_peer(r);
}

void CudaBackend::mask_peer(int r) {
  check_rank(r, "mask_peer");
  host_mask_[static_cast<std::size_t>(r)] = 1;
  // Bytes of 1 (0x01010101): non-zero is masked. A stream-ordered memset needs no staging.
  check(cudaMemsetAsync(d_mask_ + r, 1, sizeof(int32_t), st(stream_)), "cudaMemsetAsync");
}

void CudaBackend::unmask_peer(int r) {
  check_rank(r, "unmask_peer");
  if (peer_regions_[static_cast<std::size_t>(r)] == nullptr)
    throw UsageError(
        fmt::format("EP CUDA backend: unmask_peer({}): the rank has no region (set_peer_region first)", r));
  check(cudaStreamSynchronize(st(stream_)), "cudaStreamSynchronize");  // no wait may read the failed word now
  h_failed_[r] = 0;
  host_mask_[static_cast<std::size_t>(r)] = 0;
  check(cudaMemsetAsync(d_mask_ + r, 0, sizeof(int32_t), st(stream_)), "cudaMemsetAsync");
  check(cudaMemsetAsync(d_status_ + kErrorWords + r, 0, sizeof(int32_t), st(stream_)), "cudaMemsetAsync");
}

void CudaBackend::mark_failed(int r) {
  if (r < 0 || r >= shape_.max_ranks || r == rank_) return;
  // Polled by the device waits: a plain volatile store to mapped host memory.
  *static_cast<volatile int32_t*>(h_failed_ + r) = 1;
}

std::vector<int> CudaBackend::masked() const {
  std::vector<int> out;
  for (int r = 0; r < num_peers_; ++r)
    if (host_mask_[static_cast<std::size_t>(r)]) out.push_back(r);
  return out;
}

namespace {
detail::Params params_of(const Shape& s, const RegionLayout& l, int rank, const Routing& r, uint64_t epoch, Format f,
                         std::chrono::milliseconds timeout) {
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
  p.epoch = epoch;
  p.fp8 = f == Format::kFP8 ? 1 : 0;
  p.timeout_ns = static_cast<unsigned long long>(std::chrono::nanoseconds(timeout).count());
  return p;
}
}  // namespace

void CudaBackend::upload_active(const Routing& routing) {
  std::vector<uint8_t> active(static_cast<std::size_t>(shape_.max_ranks), 0);
  for (int r = 0; r < routing.num_ranks; ++r) active[static_cast<std::size_t>(r)] = routing.is_active(r) ? 1 : 0;
  if (active_valid_ && active == uploaded_active_) return;
  // Rare (a phase change): the staging buffer may still feed an earlier copy otherwise.
  check(cudaStreamSynchronize(st(stream_)), "cudaStreamSynchronize");
  std::memcpy(h_stage_, active.data(), active.size());
  check(cudaMemcpyAsync(d_active_, h_stage_, active.size(), cudaMemcpyHostToDevice, st(stream_)),
        "cudaMemcpyAsync of the active flags");
  check(cudaStreamSynchronize(st(stream_)), "cudaStreamSynchronize");
  uploaded_active_ = std::move(active);
  active_valid_ = true;
}

detail::PeerState CudaBackend::peer_state() const {
  return {d_live_,
          d_active_,
          d_mask_,
          d_failed_,
          d_status_ + kErrorWords,
          reinterpret_cast<detail::DeviceError*>(d_status_),
          d_counters_};
}

void CudaBackend::dispatch_send(const uint16_t* x, const int64_t* topk_idx, int num_tokens, const Routing& routing,
                                Format f) {
  const Shape& s = shape_;
  // The distinct-experts check runs in the count kernel (topk_idx is device memory).
  check_dispatch_call(s, num_tokens, routing, rank_, num_peers_, "peer regions");
  for (int r = 0; r < routing.num_ranks; ++r)
    if (routing.is_active(r) && peer_regions_[static_cast<std::size_t>(r)] == nullptr && !host_mask_[r])
      throw UsageError(fmt::format("EP dispatch: rank {} is active but has no region (set_peer_region)", r));
  upload_active(routing);
  ++epoch_;
  routing_ = routing;
  format_ = f;
  topk_idx_ = topk_idx;
  num_tokens_ = num_tokens;
  const auto p = params_of(s, layout_, rank_, routing_, epoch_, format_, timeout_);
  const detail::PeerState ps = peer_state();
  check(detail::launch_count(p, ps, topk_idx, num_tokens, d_slot_, d_counts_, st(stream_)), "count kernel");
  check(detail::launch_dispatch(p, ps, d_regions_, x, topk_idx, d_slot_, d_counts_, num_tokens, st(stream_)),
        "dispatch kernel");
}

void CudaBackend::dispatch_recv(const DispatchOutput& out) {
  const auto p = params_of(shape_, layout_, rank_, routing_, epoch_, format_, timeout_);
  const detail::PeerState ps = peer_state();
  const detail::DevOut o{out.recv_x,        out.recv_scales,  out.recv_src_token,
                         out.recv_src_topk, out.layout_count, out.recv_count};
  check(detail::launch_unpack(p, ps, peer_regions_[static_cast<std::size_t>(rank_)], o, st(stream_)), "unpack kernel");
}

void CudaBackend::combine_send(const uint16_t* expert_out, const DispatchOutput& handle) {
  const auto p = params_of(shape_, layout_, rank_, routing_, epoch_, format_, timeout_);
  const detail::PeerState ps = peer_state();
  check(detail::launch_combine_send(p, ps, d_regions_, handle.layout_count, handle.recv_src_token, handle.recv_src_topk,
                                    expert_out, st(stream_)),
        "combine send kernel");
}

void CudaBackend::combine_recv(const int64_t* topk_idx, const float* topk_weights, int num_tokens, uint16_t* out) {
  check_combine_call(shape_, num_tokens);
  const auto p = params_of(shape_, layout_, rank_, routing_, epoch_, format_, timeout_);
  const detail::PeerState ps = peer_state();
  void* own = peer_regions_[static_cast<std::size_t>(rank_)];
  check(detail::launch_combine_wait(p, ps, own, st(stream_)), "combine wait kernel");
  check(detail::launch_combine_reduce(p, ps, own, topk_idx, topk_weights, num_tokens, out, st(stream_)),
        "combine reduce kernel");
}

void CudaBackend::throw_duplicate_expert(int token, int64_t expert) const {
  // The host backend's check over the call's selections gives the same message (both top-k
  // slots); only a caller that changed topk_idx since the call gets the device's account.
  std::vector<int64_t> idx(static_cast<std::size_t>(num_tokens_) * static_cast<std::size_t>(shape_.topk));
  if (!idx.empty()) {
    check(cudaMemcpyAsync(idx.data(), topk_idx_, idx.size() * sizeof(int64_t), cudaMemcpyDeviceToHost, st(stream_)),
          "cudaMemcpyAsync of topk_idx");
    check(cudaStreamSynchronize(st(stream_)), "cudaStreamSynchronize");
  }
  check_distinct_experts(idx, shape_.topk);
  throw UsageError(fmt::format(
      "EP dispatch (epoch {}): token {} selects expert {} twice (seen on the device; topk_idx has changed since "
      "the call); a token's experts must be distinct",
      epoch_, token, expert));
}

void CudaBackend::synchronize(const PeerFailedPoll& peer_failed) {
  // Each call has at most two device waits, each bounded by the timeout; time-slicing
  // with other processes on the GPU is what the extra 30 s allow for.
  const auto deadline = std::chrono::steady_clock::now() + 2 * timeout_ + std::chrono::seconds(30);
  cudaError_t err;
  while ((err = cudaStreamQuery(st(stream_))) == cudaErrorNotReady) {
    if (peer_failed)
      for (int r = 0; r < routing_.num_ranks; ++r)
        if (r != rank_ && !host_mask_[static_cast<std::size_t>(r)] && h_failed_[r] == 0 && routing_.is_active(r) &&
            peer_failed(r))
          mark_failed(r);
    if (std::chrono::steady_clock::now() > deadline)
      throw TimeoutError(
          fmt::format("EP CUDA: rank {}: the GPU stream did not finish within {} ms although every "
                      "device wait is bounded by {} ms (a hung GPU or a kernel fault?)",
                      rank_, (2 * timeout_ + std::chrono::seconds(30)).count(), timeout_.count()));
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  check(err, "EP CUDA stream");
  const std::size_t R = static_cast<std::size_t>(shape_.max_ranks);
  const std::size_t status_bytes = sizeof(int32_t) * (kErrorWords + R);
  check(cudaMemcpyAsync(h_stage_, d_status_, status_bytes, cudaMemcpyDeviceToHost, st(stream_)),
        "cudaMemcpyAsync of the device status");
  check(cudaStreamSynchronize(st(stream_)), "cudaStreamSynchronize");
  detail::DeviceError e;
  std::memcpy(&e, h_stage_, sizeof e);
  std::vector<int> missing;
  for (std::size_t r = 0; r < R; ++r)
    if (reinterpret_cast<const int32_t*>(h_stage_)[kErrorWords + r] != 0) missing.push_back(static_cast<int>(r));
  // Reported once; the mask stays.
  check(cudaMemsetAsync(d_status_, 0, status_bytes, st(stream_)), "cudaMemsetAsync of the device status");
  check(cudaStreamSynchronize(st(stream_)), "cudaStreamSynchronize");
  for (int r : missing) host_mask_[static_cast<std::size_t>(r)] = 1;
  if (e.code == detail::kErrDuplicateExpert) throw_duplicate_expert(e.row, e.value);
  if (e.code != detail::kErrNone) {
    const int T = shape_.max_tokens, rows_per_expert = shape_.max_ranks * T;
    throw Error(
        fmt::format("EP CUDA (epoch {}): rank {}: corrupt {} from rank {} (local expert {}, slot {}): bad {} "
                    "(value {:#x}); nothing was signalled or written to peers after it",
                    epoch_, rank_, e.code == detail::kErrHandle ? "combine handle" : "message", e.src,
                    e.row / rows_per_expert, e.row % T, error_field(e.code), static_cast<uint32_t>(e.value)));
  }
  if (missing.empty()) return;
  const bool all_failed = std::all_of(missing.begin(), missing.end(), [&](int r) { return h_failed_[r] != 0; });
  if (all_failed)
    throw PeerFailureError(fmt::format("EP CUDA (epoch {}): rank {}: rank(s) {} failed (reported by the worker "
                                       "library); masked",
                                       epoch_, rank_, format_ranks(missing)),
                           missing);
  throw PeerTimeoutError(
      fmt::format("EP CUDA (epoch {}): rank {} got no completion signal from rank(s) {} within {} ms; "
                  "masked",
                  epoch_, rank_, format_ranks(missing), timeout_.count()),
      missing);
}

}  // namespace hyrun::ep::cuda
