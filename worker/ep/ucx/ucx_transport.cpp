#include "hyrun/ep/ucx_transport.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace hyrun::ep {

namespace {
constexpr std::size_t kDescriptorHeader = 16;  // u64 address, u64 length, then the packed rkey
constexpr const char* kWho = "UCX EP transport";

/// The worker's active-message id of write messages (World itself uses tag matching only).
constexpr unsigned kWriteMessageId = 7;

void sort_unique(std::vector<int>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

/// Whether UCX would emulate puts on `ep` (no RMA lane: tcp). UCX 1.13 tells this only in
/// its endpoint report, which lists a "put[lane]" protocol line for each RMA lane.
bool rma_is_emulated(ucp_ep_h ep) {
  char* text = nullptr;
  std::size_t size = 0;
  FILE* stream = open_memstream(&text, &size);
  if (stream == nullptr) return false;  // cannot tell: puts, as before
  ucp_ep_print_info(ep, stream);
  std::fclose(stream);
  const bool emulated = std::string_view(text, size).find("put[") == std::string_view::npos;
  std::free(text);
  return emulated;
}
}  // namespace

UcxTransport::UcxTransport(const UcxBootstrap& boot, void* region, std::size_t region_bytes,
                           std::chrono::milliseconds timeout, PeerAttach attach)
    : rank_(boot.rank),
      size_(boot.size),
      context_(boot.context),
      worker_(boot.worker),
      endpoint_(boot.endpoint),
      peer_failed_(boot.peer_failed),
      bytes_(region_bytes),
      timeout_(timeout),
      region_mem_(region, FreeRegion{region == nullptr}) {
  if (region_bytes == 0) throw UsageError("UCX EP transport: region_bytes must be > 0");
  if (size_ < 1 || rank_ < 0 || rank_ >= size_ || !context_ || !worker_ || (size_ > 1 && !endpoint_) ||
      (attach == PeerAttach::kCollective && !boot.allgatherv))
    throw UsageError(
        "UCX EP transport: incomplete bootstrap (rank, size, context, worker, endpoint, and allgatherv unless "
        "PeerAttach::kDeferred)");
  if (region == nullptr) allocate_region();
  if (!memh_) map_region();
  pack_descriptor();
  write_messages_ = accept_write_messages();  // before any peer has the descriptor
  peers_.resize(static_cast<std::size_t>(size_));
  peers_[static_cast<std::size_t>(rank_)].length = bytes_;  // self writes are memcpy
  if (attach == PeerAttach::kDeferred) return;

  // Members own every handle, so a throw below releases everything acquired so far.
  const auto all = boot.allgatherv(descriptor_);
  if (all.size() != static_cast<std::size_t>(size_))
    throw Error(
        fmt::format("UCX EP transport: the descriptor exchange returned {} entries for {} ranks", all.size(), size_));
  for (int p = 0; p < size_; ++p)
    if (p != rank_) attach_peer(p, all[static_cast<std::size_t>(p)]);
}

void UcxTransport::allocate_region() {
  // Memory that UCX allocates can come from a shared-memory transport (posix, sysv):
  // peers on this node then map it (ucp_rkey_ptr) and their puts are plain stores, not a
  // system call per put (cma). Where UCX cannot, the transport allocates it itself.
  if (auto mapped = ucx::MappedMemory::allocate(context_, bytes_)) {
    std::memset(mapped->address(), 0, bytes_);
    region_mem_ = std::unique_ptr<void, FreeRegion>(mapped->address(), FreeRegion{false});  // freed by the unmap
    memh_ = std::move(*mapped);
    return;
  }
  const std::size_t page = 4096, rounded = (bytes_ + page - 1) / page * page;
  region_mem_ = std::unique_ptr<void, FreeRegion>(std::aligned_alloc(page, rounded), FreeRegion{true});
  if (!region_mem_) throw Error(fmt::format("UCX EP transport: cannot allocate {} bytes", rounded));
  std::memset(region_mem_.get(), 0, rounded);
}

void UcxTransport::map_region() { memh_ = ucx::MappedMemory::map(context_, region_mem_.get(), bytes_, kWho); }

void UcxTransport::pack_descriptor() {
  const auto packed = memh_.pack_rkey(kWho);
  descriptor_.resize(kDescriptorHeader + packed.size());
  const uint64_t addr = reinterpret_cast<uintptr_t>(region_mem_.get()), bytes = bytes_;
  std::memcpy(descriptor_.data(), &addr, 8);
  std::memcpy(descriptor_.data() + 8, &bytes, 8);
  std::memcpy(descriptor_.data() + kDescriptorHeader, packed.data(), packed.size());
}

UcxTransport::~UcxTransport() {
  // Best effort: complete what is outstanding without throwing, within one timeout;
  // the members then destroy the rkeys, unmap and free the region.
  drain(-1, Clock::now() + timeout_);
  if (write_messages_) {  // later write messages are dropped by UCX (no handler), not stored
    ucp_am_handler_param_t param{};
    param.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB;
    param.id = kWriteMessageId;
    param.cb = nullptr;
    (void)ucp_worker_set_am_recv_handler(worker_, &param);
  }
  if (writes_may_be_in_flight_) {
    // Some write did not complete in time (UCX's tcp put emulation can stall): peers'
    // writes may also still be on their way here, and UCX stores them at the raw
    // address when this worker progresses later (e.g. while World closes its
    // endpoints). Unmapping now would turn them into a crash; keep the memory until exit.
    spdlog::warn(
        "UCX EP transport: rank {}: writes timed out; the {}-byte region stays mapped until the process "
        "exits, so that late writes land harmlessly",
        rank_, bytes_);
    memh_.keep_until_exit();
    (void)region_mem_.release();
  }
}

bool UcxTransport::attached(int peer) const {
  if (peer < 0 || peer >= size_) return false;
  return peer == rank_ || static_cast<bool>(peers_[static_cast<std::size_t>(peer)].rkey);
}

void UcxTransport::attach_peer(int peer, std::span<const std::byte> d) {
  if (peer < 0 || peer >= size_)
    throw UsageError(fmt::format("UCX EP transport: attach_peer: peer {} out of range [0, {})", peer, size_));
  if (peer == rank_) return;
  if (d.size() <= kDescriptorHeader)
    throw UsageError(fmt::format("UCX EP transport: rank {}'s region descriptor has {} bytes, expected more than {}",
                                 peer, d.size(), kDescriptorHeader));
  uint64_t addr, len;
  std::memcpy(&addr, d.data(), 8);
  std::memcpy(&len, d.data() + 8, 8);
  if (addr == 0 || len == 0)
    throw UsageError(fmt::format("UCX EP transport: rank {}'s region descriptor is empty (address {:#x}, {} bytes)",
                                 peer, addr, len));
  ucp_ep_h ep = endpoint_(peer);
  if (ep == nullptr) throw Error(fmt::format("UCX EP transport: no endpoint to rank {}", peer));
  ucx::RemoteKey key(ep, d.data() + kDescriptorHeader, kWho, fmt::format("rank {}'s", peer));
  // Requests in flight used the old key and endpoint: finish with them before replacing.
  drain(peer, Clock::now() + timeout_);
  Peer& p = peers_[static_cast<std::size_t>(peer)];
  p.ep = ep;
  p.rkey = std::move(key);  // destroys the previous key
  p.address = addr;
  p.length = len;
  p.dirty = false;
  // Mapped into this process when a shared-memory transport reaches the peer's region.
  p.local = p.rkey.local_pointer(addr);
  p.by_message = write_messages_ && p.local == nullptr && rma_is_emulated(ep);
}

bool UcxTransport::accept_write_messages() {
  ucp_am_handler_param_t param{};
  param.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                     UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  param.id = kWriteMessageId;
  param.flags = UCP_AM_FLAG_WHOLE_MSG;
  param.cb = &UcxTransport::on_write;
  param.arg = this;
  return ucp_worker_set_am_recv_handler(worker_, &param) == UCS_OK;  // fails without UCP_FEATURE_AM
}

ucs_status_t UcxTransport::on_write(void* arg, const void* header, std::size_t header_length, void* data,
                                    std::size_t length, const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxTransport*>(arg);
  WriteHeader h;
  // Only this transport's eager messages: a rendezvous one (never sent by it) is dropped.
  if (header_length != sizeof h || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) return UCS_OK;
  std::memcpy(&h, header, sizeof h);
  auto* base = static_cast<std::byte*>(self->region_mem_.get());
  const bool fits = h.offset <= self->bytes_ && length <= self->bytes_ - h.offset;
  const bool good_signal = h.is_signal == 0 || (length == 8 && h.offset % 8 == 0);
  if (h.region != reinterpret_cast<uintptr_t>(base) || !fits || !good_signal) {
    // A write for an earlier region of this rank (replaced meanwhile) or out of bounds.
    spdlog::warn("UCX EP transport: rank {}: dropped a write message of {} bytes at offset {} (region {:#x})",
                 self->rank_, length, h.offset, h.region);
    return UCS_OK;
  }
  if (h.is_signal != 0) {  // as signal() stores its own: the waiter reads it with acquire
    uint64_t value;
    std::memcpy(&value, data, 8);
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(base + h.offset)).store(value, std::memory_order_release);
  } else {
    std::memcpy(base + h.offset, data, length);
  }
  return UCS_OK;
}

ucs_status_ptr_t UcxTransport::start_write(int peer, std::size_t off, const void* src, std::size_t len,
                                           bool is_signal) {
  const Peer& p = peers_[static_cast<std::size_t>(peer)];
  ucp_request_param_t prm{};
  if (!p.by_message) return ucp_put_nbx(p.ep, src, len, p.address + off, p.rkey.get(), &prm);
  headers_.push_back({p.address, off, is_signal ? 1u : 0u});  // deque: the address stays valid until flush
  // Eager only: a rendezvous would need the target's answer, the very thing to avoid.
  prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  prm.flags = UCP_AM_SEND_FLAG_EAGER;
  return ucp_am_send_nbx(p.ep, kWriteMessageId, &headers_.back(), sizeof(WriteHeader), src, len, &prm);
}

void UcxTransport::detach_peer(int peer) {
  if (peer < 0 || peer >= size_ || peer == rank_)
    throw UsageError(fmt::format("UCX EP transport: detach_peer: peer {} is not another rank in [0, {})", peer, size_));
  drain(peer, Clock::now() + timeout_);
  Peer& p = peers_[static_cast<std::size_t>(peer)];
  p.rkey.reset();
  p = Peer{};
}

void UcxTransport::drain(int peer, Clock::time_point deadline) noexcept {
  auto mine = [peer](const std::pair<int, ucx::Request>& r) { return peer < 0 || r.first == peer; };
  for (auto& r : pending_) {
    if (!mine(r)) continue;
    (void)wait_request(r.first, r.second, deadline);
    if (r.second.in_progress()) {
      retire_signal_values();
      if (!known_failed(r.first)) writes_may_be_in_flight_ = true;  // a dead peer writes nothing more
    }
    r.second.release();  // releases it even if still in progress (RMA requests cannot be cancelled)
  }
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(), mine), pending_.end());
  if (peer >= 0) {
    peers_[static_cast<std::size_t>(peer)].dirty = false;
    failed_.erase(std::remove(failed_.begin(), failed_.end(), peer), failed_.end());
    skipped_.erase(std::remove(skipped_.begin(), skipped_.end(), peer), skipped_.end());
  } else {
    pending_.clear();
  }
}

void UcxTransport::retire_signal_values() noexcept {
  // UCX may still read an abandoned signal's source: keep the values for the transport's
  // lifetime (8 bytes a signal). swap keeps the elements' addresses.
  try {
    if (!signal_values_.empty()) {
      retired_signal_values_.emplace_back();
      retired_signal_values_.back().swap(signal_values_);
    }
    if (!headers_.empty()) {  // the same for write messages' headers
      retired_headers_.emplace_back();
      retired_headers_.back().swap(headers_);
    }
  } catch (...) {
    return;  // out of memory: nothing better to do
  }
}

void UcxTransport::check(int peer, std::size_t off, std::size_t len) const {
  const std::size_t limit = peers_[static_cast<std::size_t>(peer)].length;
  if (off > limit || len > limit - off)
    throw Error(fmt::format("UCX EP transport: write of {} bytes at offset {} exceeds rank {}'s region of {} bytes",
                            len, off, peer, limit));
}

bool UcxTransport::writable(int peer) {
  if (peer < 0 || peer >= size_)
    throw Error(fmt::format("UCX EP transport: peer {} out of range [0, {})", peer, size_));
  if (peer == rank_) return true;
  if (!peers_[static_cast<std::size_t>(peer)].rkey) {
    skipped_.push_back(peer);
    return false;
  }
  if (known_failed(peer)) {
    failed_.push_back(peer);
    return false;
  }
  return true;
}

void UcxTransport::track(int peer, ucs_status_ptr_t sp) {
  peers_[static_cast<std::size_t>(peer)].dirty = true;
  if (sp == nullptr) return;  // completed in place
  if (UCS_PTR_IS_ERR(sp)) {
    failed_.push_back(peer);
    return;
  }
  pending_.emplace_back(peer, ucx::Request(sp));
}

void UcxTransport::put(int peer, std::size_t off, const void* src, std::size_t len) {
  if (!writable(peer)) return;
  check(peer, off, len);
  if (len == 0) return;
  if (peer == rank_) {
    std::memcpy(static_cast<std::byte*>(region_mem_.get()) + off, src, len);
    return;
  }
  track(peer, start_write(peer, off, src, len, false));
}

std::byte* UcxTransport::mapped(int peer, std::size_t off, std::size_t len) {
  if (peer < 0 || peer >= size_)
    throw Error(fmt::format("UCX EP transport: peer {} out of range [0, {})", peer, size_));
  if (peer != rank_) {
    const Peer& p = peers_[static_cast<std::size_t>(peer)];
    if (p.local == nullptr || !p.rkey || known_failed(peer)) return nullptr;  // put() reports these
  }
  check(peer, off, len);
  if (peer == rank_) return static_cast<std::byte*>(region_mem_.get()) + off;
  return peers_[static_cast<std::size_t>(peer)].local + off;
}

void UcxTransport::signal(int peer, std::size_t off, uint64_t value) {
  if (!writable(peer)) return;
  check(peer, off, 8);
  if (off % 8 != 0) throw Error(fmt::format("UCX EP transport: signal offset {} is not 8-aligned", off));
  if (peer == rank_) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(static_cast<std::byte*>(region_mem_.get()) + off))
        .store(value, std::memory_order_release);
    return;
  }
  signal_values_.push_back(value);  // deque: the address stays valid until flush
  track(peer, start_write(peer, off, &signal_values_.back(), 8, true));
}

ucs_status_t UcxTransport::wait_request(int peer, ucx::Request& req, Clock::time_point deadline) {
  // UCX fails a dead peer's requests before it reports the peer (error callback), so
  // nothing more will complete once it is known failed: stop waiting.
  if (known_failed(peer) && req.in_progress()) return UCS_ERR_CONNECTION_RESET;
  return req.wait(worker_, deadline, [this, peer] { return known_failed(peer); });
}

void UcxTransport::flush() {
  const auto deadline = Clock::now() + timeout_;
  progress_.restart();  // a new batch: the next signal wait starts polling afresh
  std::vector<int> timed_out;
  // 1. Local completion of every request (their source buffers may be reused after this).
  bool abandoned = false;  // a request freed while UCX may still hold it
  for (auto& [peer, req] : pending_) {
    ucs_status_t st = wait_request(peer, req, deadline);
    abandoned |= req.in_progress();
    if (st == UCS_ERR_TIMED_OUT) {
      timed_out.push_back(peer);  // ucp_request_free below lets UCX finish or drop it internally
      writes_may_be_in_flight_ = true;
    } else if (st != UCS_OK) {
      failed_.push_back(peer);
    }
    req.release();
  }
  pending_.clear();
  // 2. Remote completion: flush every endpoint written since the last flush (not those of
  // failed peers: their endpoint is dead, the data lost anyway).
  std::vector<std::pair<int, ucx::Request>> flushes;
  for (int p = 0; p < size_; ++p) {
    Peer& peer = peers_[static_cast<std::size_t>(p)];
    const bool dirty = peer.dirty;
    peer.dirty = false;
    if (!dirty || p == rank_) continue;
    if (known_failed(p)) {
      failed_.push_back(p);
      continue;
    }
    ucp_request_param_t prm{};
    ucx::Request request(ucp_ep_flush_nbx(peer.ep, &prm));
    const ucs_status_t status = request.status();
    if (status == UCS_OK) continue;
    if (status != UCS_INPROGRESS) {
      failed_.push_back(p);
      continue;
    }
    flushes.emplace_back(p, std::move(request));
  }
  for (auto& [p, req] : flushes) {
    ucs_status_t st = wait_request(p, req, deadline);
    if (st == UCS_ERR_TIMED_OUT) {
      timed_out.push_back(p);
      writes_may_be_in_flight_ = true;
    } else if (st != UCS_OK) {
      failed_.push_back(p);
    }
    req.release();
  }
  if (abandoned) retire_signal_values();
  signal_values_.clear();
  headers_.clear();
  std::atomic_thread_fence(std::memory_order_seq_cst);
  std::vector<int> failed = std::move(failed_), skipped = std::move(skipped_);
  failed_.clear();
  skipped_.clear();
  sort_unique(failed);
  sort_unique(skipped);
  if (!failed.empty() || !skipped.empty()) {
    std::vector<int> all = failed;
    all.insert(all.end(), skipped.begin(), skipped.end());
    sort_unique(all);
    std::string what;
    if (!failed.empty()) what = fmt::format("one-sided writes to rank(s) {} failed", format_ranks(failed));
    if (!skipped.empty())
      what += fmt::format("{}rank(s) {} not attached (detached or never attached; writes not issued)",
                          what.empty() ? "" : "; ", format_ranks(skipped));
    throw PeerFailureError(fmt::format("UCX EP transport: rank {}: {}", rank_, what), all);
  }
  if (!timed_out.empty()) {
    sort_unique(timed_out);
    throw PeerTimeoutError(fmt::format("UCX EP transport: rank {}: writes to rank(s) {} did not complete within {} ms",
                                       rank_, format_ranks(timed_out), timeout_.count()),
                           timed_out);
  }
}

}  // namespace hyrun::ep
