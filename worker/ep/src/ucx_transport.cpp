#include "hyrun/ep/ucx_transport.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace hyrun::ep {

namespace {
std::string ucs(ucs_status_t s) { return ucs_status_string(s); }
}  // namespace

UcxTransport::UcxTransport(const UcxBootstrap& boot, void* region, std::size_t region_bytes,
                           std::chrono::milliseconds timeout)
    : base_(region), bytes_(region_bytes), owned_(region == nullptr), timeout_(timeout) {
  if (region_bytes == 0) throw UsageError("UCX EP transport: region_bytes must be > 0");
  if (owned_) {
    const std::size_t page = 4096, rounded = (region_bytes + page - 1) / page * page;
    base_ = std::aligned_alloc(page, rounded);
    if (base_ == nullptr) throw Error(fmt::format("UCX EP transport: cannot allocate {} bytes", rounded));
    std::memset(base_, 0, rounded);
  }
  try {
    init(boot);
  } catch (...) {
    cleanup();
    throw;
  }
}

void UcxTransport::init(const UcxBootstrap& boot) {
  rank_ = boot.rank;
  size_ = boot.size;
  context_ = boot.context;
  worker_ = boot.worker;
  if (size_ < 1 || rank_ < 0 || rank_ >= size_ || !context_ || !worker_ || !boot.allgatherv ||
      (size_ > 1 && !boot.endpoint))
    throw UsageError("UCX EP transport: incomplete bootstrap (rank, size, context, worker, endpoint, allgatherv)");

  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = base_;
  mp.length = bytes_;
  ucs_status_t st = ucp_mem_map(context_, &mp, &memh_);
  if (st != UCS_OK) {
    memh_ = nullptr;
    throw Error(fmt::format("UCX EP transport: ucp_mem_map of {} bytes failed: {}", bytes_, ucs(st)));
  }

  void* rkey_buf = nullptr;
  std::size_t rkey_len = 0;
  st = ucp_rkey_pack(context_, memh_, &rkey_buf, &rkey_len);
  if (st != UCS_OK) {
    cleanup();
    throw Error(fmt::format("UCX EP transport: ucp_rkey_pack failed: {}", ucs(st)));
  }
  // Contribution: u64 address, u64 length, rkey bytes.
  std::vector<std::byte> mine(16 + rkey_len);
  const uint64_t addr = reinterpret_cast<uintptr_t>(base_), len = bytes_;
  std::memcpy(mine.data(), &addr, 8);
  std::memcpy(mine.data() + 8, &len, 8);
  std::memcpy(mine.data() + 16, rkey_buf, rkey_len);
  ucp_rkey_buffer_release(rkey_buf);

  std::vector<std::vector<std::byte>> all;
  try {
    all = boot.allgatherv(mine);
  } catch (...) {
    cleanup();
    throw;
  }
  peers_.resize(static_cast<std::size_t>(size_));
  for (int p = 0; p < size_; ++p) {
    static const std::vector<std::byte> kEmpty;
    const auto& b = p < static_cast<int>(all.size()) ? all[static_cast<std::size_t>(p)] : kEmpty;
    if (all.size() != static_cast<std::size_t>(size_) || b.size() < 16) {
      cleanup();
      throw Error(fmt::format("UCX EP transport: rank {} sent a {}-byte region descriptor", p, b.size()));
    }
    Peer& peer = peers_[static_cast<std::size_t>(p)];
    std::memcpy(&peer.address, b.data(), 8);
    uint64_t l;
    std::memcpy(&l, b.data() + 8, 8);
    peer.length = l;
    if (p == rank_) continue;
    peer.ep = boot.endpoint(p);
    st = ucp_ep_rkey_unpack(peer.ep, b.data() + 16, &peer.rkey);
    if (st != UCS_OK) {
      const std::string m = fmt::format("UCX EP transport: ucp_ep_rkey_unpack of rank {}'s key failed: {}", p, ucs(st));
      cleanup();
      throw Error(m);
    }
  }
}

UcxTransport::~UcxTransport() { cleanup(); }

void UcxTransport::cleanup() noexcept {
  // Best effort: complete what is outstanding without throwing, within one timeout.
  const auto deadline = Clock::now() + timeout_;
  for (auto& [peer, req] : pending_) {
    (void)peer;
    while (ucp_request_check_status(req) == UCS_INPROGRESS && Clock::now() < deadline) ucp_worker_progress(worker_);
    ucp_request_free(req);  // releases it even if still in progress (RMA requests cannot be cancelled)
  }
  pending_.clear();
  for (auto& p : peers_)
    if (p.rkey) ucp_rkey_destroy(p.rkey), p.rkey = nullptr;
  if (memh_) ucp_mem_unmap(context_, memh_), memh_ = nullptr;
  if (owned_ && base_) std::free(base_), base_ = nullptr;
}

void UcxTransport::check(int peer, std::size_t off, std::size_t len) const {
  if (peer < 0 || peer >= size_)
    throw Error(fmt::format("UCX EP transport: peer {} out of range [0, {})", peer, size_));
  const std::size_t limit = peers_[static_cast<std::size_t>(peer)].length;
  if (off > limit || len > limit - off)
    throw Error(fmt::format("UCX EP transport: write of {} bytes at offset {} exceeds rank {}'s region of {} bytes",
                            len, off, peer, limit));
}

void UcxTransport::track(int peer, ucs_status_ptr_t sp, const char* what) {
  peers_[static_cast<std::size_t>(peer)].dirty = true;
  if (sp == nullptr) return;  // completed in place
  if (UCS_PTR_IS_ERR(sp)) {
    failed_.push_back(peer);
    (void)what;
    return;
  }
  pending_.emplace_back(peer, sp);
}

void UcxTransport::put(int peer, std::size_t off, const void* src, std::size_t len) {
  check(peer, off, len);
  if (len == 0) return;
  if (peer == rank_) {
    std::memcpy(static_cast<std::byte*>(base_) + off, src, len);
    return;
  }
  const Peer& p = peers_[static_cast<std::size_t>(peer)];
  ucp_request_param_t prm{};
  track(peer, ucp_put_nbx(p.ep, src, len, p.address + off, p.rkey, &prm), "put");
}

void UcxTransport::signal(int peer, std::size_t off, uint64_t value) {
  check(peer, off, 8);
  if (off % 8 != 0) throw Error(fmt::format("UCX EP transport: signal offset {} is not 8-aligned", off));
  if (peer == rank_) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(static_cast<std::byte*>(base_) + off))
        .store(value, std::memory_order_release);
    return;
  }
  signal_values_.push_back(value);  // deque: the address stays valid until flush
  const Peer& p = peers_[static_cast<std::size_t>(peer)];
  ucp_request_param_t prm{};
  track(peer, ucp_put_nbx(p.ep, &signal_values_.back(), 8, p.address + off, p.rkey, &prm), "signal");
}

void UcxTransport::progress_or_yield() {
  // With more ranks than cores (CI machines, ranks sharing a GPU node) a waiter that spins
  // takes the core from the peer it waits for; give it up whenever UCX had nothing to do.
  if (ucp_worker_progress(worker_) != 0) {
    idle_polls_ = 0;
    return;
  }
  if (++idle_polls_ >= kIdlePollsBeforeYield) {
    idle_polls_ = 0;
    std::this_thread::yield();
  }
}

ucs_status_t UcxTransport::wait_request(void* req, Clock::time_point deadline) {
  ucs_status_t st;
  while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS) {
    if (Clock::now() >= deadline) return UCS_ERR_TIMED_OUT;
    progress_or_yield();
  }
  return st;
}

void UcxTransport::flush() {
  const auto deadline = Clock::now() + timeout_;
  std::vector<int> timed_out;
  // 1. Local completion of every request (their source buffers may be reused after this).
  for (auto& [peer, req] : pending_) {
    ucs_status_t st = wait_request(req, deadline);
    if (st == UCS_ERR_TIMED_OUT) {
      timed_out.push_back(peer);  // ucp_request_free below lets UCX finish or drop it internally
    } else if (st != UCS_OK) {
      failed_.push_back(peer);
    }
    ucp_request_free(req);
  }
  pending_.clear();
  // 2. Remote completion: flush every endpoint written since the last flush.
  std::vector<std::pair<int, void*>> flushes;
  for (int p = 0; p < size_; ++p) {
    Peer& peer = peers_[static_cast<std::size_t>(p)];
    if (!peer.dirty || p == rank_) {
      peer.dirty = false;
      continue;
    }
    peer.dirty = false;
    ucp_request_param_t prm{};
    ucs_status_ptr_t sp = ucp_ep_flush_nbx(peer.ep, &prm);
    if (sp == nullptr) continue;
    if (UCS_PTR_IS_ERR(sp)) {
      failed_.push_back(p);
      continue;
    }
    flushes.emplace_back(p, sp);
  }
  for (auto& [p, req] : flushes) {
    ucs_status_t st = wait_request(req, deadline);
    if (st == UCS_ERR_TIMED_OUT) {
      timed_out.push_back(p);
    } else if (st != UCS_OK) {
      failed_.push_back(p);
    }
    ucp_request_free(req);
  }
  signal_values_.clear();
  std::atomic_thread_fence(std::memory_order_seq_cst);
  auto uniq = [](std::vector<int>& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  };
  if (!failed_.empty()) {
    std::vector<int> f = std::move(failed_);
    failed_.clear();
    uniq(f);
    throw PeerFailureError(
        fmt::format("UCX EP transport: rank {}: one-sided writes to rank(s) {} failed", rank_, format_ranks(f)), f);
  }
  if (!timed_out.empty()) {
    uniq(timed_out);
    throw PeerTimeoutError(fmt::format("UCX EP transport: rank {}: writes to rank(s) {} did not complete within {} ms",
                                       rank_, format_ranks(timed_out), timeout_.count()),
                           timed_out);
  }
}

}  // namespace hyrun::ep
