#include "hyrun/ep/transport.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

namespace hyrun::ep {

class InProcessFabric::RankTransport final : public Transport {
 public:
  RankTransport(InProcessFabric& f, int rank)
      : fabric_(f), rank_(rank), detached_(static_cast<std::size_t>(f.num_ranks()), 0) {}
  int rank() const override { return rank_; }
  int num_ranks() const override { return fabric_.num_ranks(); }
  std::span<std::byte> region() override { return fabric_.region(rank_); }

  void put(int peer, std::size_t off, const void* src, std::size_t len) override {
    check(peer, off, len);
    if (unreachable(peer)) {
      failed_.push_back(peer);
      return;
    }
    if (fabric_.writes_ == Writes::kPutOnly)
      pending_.push_back({fabric_.regions_[peer].get() + off, src, len});
    else
      std::memcpy(fabric_.regions_[peer].get() + off, src, len);
  }
  std::byte* mapped(int peer, std::size_t off, std::size_t len) override {
    check(peer, off, len);
    if (unreachable(peer)) return nullptr;  // put() reports it
    if (fabric_.writes_ == Writes::kPutOnly && peer != rank_) return nullptr;
    return fabric_.regions_[peer].get() + off;
  }
  void signal(int peer, std::size_t off, uint64_t value) override {
    check(peer, off, 8);
    if (off % 8 != 0) throw Error(fmt::format("in-process transport: signal offset {} is not 8-aligned", off));
    if (unreachable(peer)) {
      failed_.push_back(peer);
      return;
    }
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(fabric_.regions_[peer].get() + off))
        .store(value, std::memory_order_release);
  }
  void flush() override {
    complete_puts();
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!failed_.empty()) {
      std::vector<int> f = std::move(failed_);
      failed_.clear();
      std::sort(f.begin(), f.end());
      f.erase(std::unique(f.begin(), f.end()), f.end());
      throw PeerFailureError(fmt::format("in-process transport: rank {}: writes to dead or detached rank(s) {} failed",
                                         rank_, format_ranks(f)),
                             f);
    }
  }
  // A descriptor is the rank's number (4 bytes): every region is in this process.
  std::vector<std::byte> local_descriptor() const override {
    std::vector<std::byte> d(sizeof(std::uint32_t));
    const auto r = static_cast<std::uint32_t>(rank_);
    std::memcpy(d.data(), &r, d.size());
    return d;
  }
  void attach_peer(int peer, std::span<const std::byte> descriptor) override {
    if (peer < 0 || peer >= fabric_.num_ranks())
      throw UsageError(
          fmt::format("in-process transport: attach_peer: peer {} out of range [0, {})", peer, fabric_.num_ranks()));
    std::uint32_t named = 0;
    if (descriptor.size() == sizeof named) std::memcpy(&named, descriptor.data(), sizeof named);
    if (descriptor.size() != sizeof named || named != static_cast<std::uint32_t>(peer))
      throw UsageError(fmt::format("in-process transport: the descriptor given for rank {} is not that rank's", peer));
    if (peer == rank_) return;
    complete_puts();
    detached_[static_cast<std::size_t>(peer)] = 0;
  }
  void detach_peer(int peer) override {
    if (peer < 0 || peer >= fabric_.num_ranks() || peer == rank_)
      throw UsageError(fmt::format("in-process transport: detach_peer: peer {} is not another rank in [0, {})", peer,
                                   fabric_.num_ranks()));
    complete_puts();
    detached_[static_cast<std::size_t>(peer)] = 1;
  }

 private:
  void progress_while_waiting() override { std::this_thread::yield(); }
  bool peer_known_failed(int peer) override { return peer >= 0 && peer < fabric_.num_ranks() && fabric_.dead(peer); }
  bool unreachable(int peer) const { return fabric_.dead(peer) || detached_[static_cast<std::size_t>(peer)] != 0; }
  void check_peer(int peer) const {
    if (peer < 0 || peer >= fabric_.num_ranks())
      throw Error(fmt::format("in-process transport: peer {} out of range [0, {})", peer, fabric_.num_ranks()));
  }
  void check(int peer, std::size_t off, std::size_t len) const {
    check_peer(peer);
    if (off > fabric_.region_bytes_ || len > fabric_.region_bytes_ - off)
      throw Error(fmt::format("in-process transport: write of {} bytes at offset {} exceeds the region of {} bytes",
                              len, off, fabric_.region_bytes_));
  }
  void complete_puts() {
    for (const Pending& p : pending_) std::memcpy(p.dst, p.src, p.len);
    pending_.clear();
  }
  struct Pending {
    std::byte* dst;
    const void* src;
    std::size_t len;
  };
  InProcessFabric& fabric_;
  int rank_;
  std::vector<uint8_t> detached_;  // by peer: detach_peer()ed, not attached since
  std::vector<int> failed_;
  std::vector<Pending> pending_;  // kPutOnly: puts not yet flushed
};

InProcessFabric::InProcessFabric(int num_ranks, std::size_t region_bytes, Writes writes)
    : region_bytes_(region_bytes), dead_(static_cast<std::size_t>(num_ranks), 0), writes_(writes) {
  if (num_ranks < 1) throw UsageError("in-process fabric: num_ranks must be >= 1");
  for (int r = 0; r < num_ranks; ++r) {
    regions_.emplace_back(new std::byte[region_bytes]());  // 16-aligned, zeroed
  }
  for (int r = 0; r < num_ranks; ++r) transports_.push_back(std::make_unique<RankTransport>(*this, r));
}
InProcessFabric::~InProcessFabric() = default;

Transport& InProcessFabric::transport(int rank) { return *transports_.at(static_cast<std::size_t>(rank)); }
std::span<std::byte> InProcessFabric::region(int rank) {
  return {regions_.at(static_cast<std::size_t>(rank)).get(), region_bytes_};
}
void InProcessFabric::kill(int rank) { std::atomic_ref<uint8_t>(dead_.at(static_cast<std::size_t>(rank))).store(1); }
void InProcessFabric::revive(int rank) { std::atomic_ref<uint8_t>(dead_.at(static_cast<std::size_t>(rank))).store(0); }
bool InProcessFabric::dead(int rank) const {
  // atomic: tests kill a rank from one thread while the others' transports wait
  auto& mark = const_cast<uint8_t&>(dead_.at(static_cast<std::size_t>(rank)));
  return std::atomic_ref<uint8_t>(mark).load() != 0;
}

std::vector<int> Transport::wait_signals(std::span<const int> peers, std::size_t first, uint64_t value,
                                         Clock::time_point deadline) {
  std::byte* base = region().data() + first;
  std::vector<int> missing;
  for (;;) {
    missing.clear();
    for (int p : peers) {
      auto& w = *reinterpret_cast<uint64_t*>(base + 8 * static_cast<std::size_t>(p));
      if (std::atomic_ref<uint64_t>(w).load(std::memory_order_acquire) < value) missing.push_back(p);
    }
    if (missing.empty() || Clock::now() >= deadline) return missing;
    // A dead peer makes the call fail: do not sit out the deadline. Nor wait for a live
    // peer still missing: it may have seen the death an iteration earlier and left for the
    // failure agreement, never to signal this call (waiting would time out and blame it).
    if (std::any_of(missing.begin(), missing.end(), [this](int p) { return known_failed(p); })) return missing;
    progress_while_waiting();
  }
}

}  // namespace hyrun::ep
