#include "hyrun/ep/host_backend.hpp"

#include "hyrun/ep/host_dispatch_area.hpp"
#include "hyrun/ep/host_rows.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace hyrun::ep {

DispatchBuffers::DispatchBuffers(const Shape& s, Format f)
    : recv_x(recv_x_bytes(s, f)),
      recv_scales(f == Format::kFP8 ? recv_scales_count(s) : 0),
      recv_src_token(recv_rows(s)),
      recv_src_topk(recv_rows(s)),
      layout_count(static_cast<std::size_t>(s.experts_per_rank) * s.max_ranks),
      recv_count(static_cast<std::size_t>(s.experts_per_rank)) {}

DispatchOutput DispatchBuffers::view() {
  return DispatchOutput{recv_x.data(),         recv_scales.empty() ? nullptr : recv_scales.data(),
                        recv_src_token.data(), recv_src_topk.data(),
                        layout_count.data(),   recv_count.data()};
}

void DispatchBuffers::poison() {
  std::memset(recv_x.data(), 0xFF, recv_x.size());
  for (auto& v : recv_scales) v = std::numeric_limits<float>::quiet_NaN();
  for (auto* v : {&recv_src_token, &recv_src_topk, &layout_count, &recv_count}) std::fill(v->begin(), v->end(), -12345);
}

HostBackend::HostBackend(const Shape& shape, Transport& transport, std::chrono::milliseconds timeout)
    : shape_(shape), transport_(transport), timeout_(timeout), layout_(region_layout(shape)) {
  if (transport_.region().size() < layout_.total)
    throw UsageError(fmt::format("EP host backend: the transport's region has {} bytes, the shape ({}) needs {}",
                                 transport_.region().size(), shape_.describe(), layout_.total));
  if (transport_.num_ranks() > shape_.max_ranks)
    throw UsageError(fmt::format("EP host backend: the transport has {} ranks, more than max_ranks={}",
                                 transport_.num_ranks(), shape_.max_ranks));
  staging_.resize(send_staging_bytes(shape_));
  peer_base_.resize(static_cast<std::size_t>(shape_.max_ranks));
  rows_.resize(static_cast<std::size_t>(shape_.topk));
  local_rows_.resize(static_cast<std::size_t>(shape_.max_tokens) * shape_.topk);
}

namespace {
void merge_into(std::vector<int>& into, const std::vector<int>& more) {
  into.insert(into.end(), more.begin(), more.end());
  std::sort(into.begin(), into.end());
  into.erase(std::unique(into.begin(), into.end()), into.end());
}
bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }
}  // namespace

void HostBackend::signal_active(const std::vector<int>& active, std::size_t signals, const char* what) {
  // A failed or stuck peer must not keep the others from their signals: otherwise every
  // survivor would wait for this (healthy) rank and name it. So the data flush's errors
  // are collected, every other active rank is signalled, and the errors are thrown last.
  // A peer whose data did not complete gets no signal (it would claim data that is not there).
  store_fence();  // the rows stream_row stored into peers' regions land before the signal
  std::vector<int> failed, timed_out;
  auto flush_collecting = [&] {
    try {
      transport_.flush();
    } catch (const PeerFailureError& e) {
      merge_into(failed, e.ranks());
    } catch (const PeerTimeoutError& e) {
      merge_into(timed_out, e.ranks());
    }
  };
  flush_collecting();
  const std::size_t mine = signals + 8 * static_cast<std::size_t>(transport_.rank());
  for (int dst : active)
    if (!contains(failed, dst) && !contains(timed_out, dst)) transport_.signal(dst, mine, epoch_);
  flush_collecting();
  if (!failed.empty()) {
    std::vector<int> all = failed;
    merge_into(all, timed_out);
    throw PeerFailureError(
        fmt::format("EP {} (epoch {}): rank {}: writes to rank(s) {} failed{}; the other active "
                    "ranks were signalled",
                    what, epoch_, transport_.rank(), format_ranks(failed),
                    timed_out.empty() ? "" : ", to rank(s) " + format_ranks(timed_out) + " timed out"),
        all);
  }
  if (!timed_out.empty())
    throw PeerTimeoutError(fmt::format("EP {} (epoch {}): rank {}: writes to rank(s) {} did not complete within the "
                                       "transport's timeout; the other active ranks were signalled",
                                       what, epoch_, transport_.rank(), format_ranks(timed_out)),
                           timed_out);
}

void HostBackend::throw_missing(const char* what, const std::vector<int>& missing) {
  std::vector<int> failed, late;
  for (int p : missing) (transport_.known_failed(p) ? failed : late).push_back(p);
  // Only the dead are named: a live rank still missing may have left the call for the
  // failure agreement (wait_signals ends at the first known death), so it is not blamed.
  if (!failed.empty())
    throw PeerFailureError(
        fmt::format("EP {} (epoch {}): rank {} got no completion signal from rank(s) {}, whose "
                    "process failed{}",
                    what, epoch_, transport_.rank(), format_ranks(failed),
                    late.empty() ? "" : fmt::format(" (nor yet from rank(s) {})", format_ranks(late))),
        failed);
  throw PeerTimeoutError(fmt::format("EP {} (epoch {}): rank {} got no completion signal from rank(s) {} within {} ms",
                                     what, epoch_, transport_.rank(), format_ranks(missing), timeout_.count()),
                         missing);
}

std::vector<int> HostBackend::active_ranks() const {
  std::vector<int> a;
  for (int r = 0; r < routing_.num_ranks; ++r)
    if (routing_.is_active(r)) a.push_back(r);
  return a;
}

void HostBackend::dispatch_send(const uint16_t* x, const int64_t* topk_idx, int num_tokens, const Routing& routing,
                                Format f) {
  send_dispatch(x, topk_idx, num_tokens, routing, f, nullptr);
}
void HostBackend::dispatch_recv(const DispatchOutput& out) { receive_dispatch(out, false); }
void HostBackend::dispatch(const uint16_t* x, const int64_t* topk_idx, int num_tokens, const Routing& routing, Format f,
                           const DispatchOutput& out) {
  send_dispatch(x, topk_idx, num_tokens, routing, f, &out);
  receive_dispatch(out, true);
}

void HostBackend::send_dispatch(const uint16_t* x, const int64_t* topk_idx, int num_tokens, const Routing& routing,
                                Format f, const DispatchOutput* local) {
  const Shape& s = shape_;
  const int me = transport_.rank();
  check_dispatch_call(s, num_tokens, routing, me, transport_.num_ranks(), "transport ranks");
  check_distinct_experts({topk_idx, static_cast<std::size_t>(num_tokens) * static_cast<std::size_t>(s.topk)}, s.topk);

  ++epoch_;
  routing_ = routing;
  format_ = f;
  const int E = s.experts_per_rank, K = s.topk, H = s.hidden, R = s.max_ranks, T = s.max_tokens;
  const int nblocks = H / kScaleBlock;
  const bool fp8 = f == Format::kFP8;
  const HostDispatchArea area = host_dispatch_area(s, layout_, f);
  const std::size_t body_bytes = area.x_row + area.scales_row;
  send_counts_.assign(static_cast<std::size_t>(routing.num_ranks) * E, 0);
  // Each payload row, its scales and its header go straight to their places in the
  // destination's region (host_dispatch_area.hpp): stored where the region is mapped here,
  // else put. Headers and scales for put() are staged per (destination, expert) and put
  // as one block each after the loop: a block's rows are contiguous at the destination.
  bool any_put = false;
  for (int dst = 0; dst < routing.num_ranks; ++dst) {
    peer_base_[dst] = routing.is_active(dst) ? transport_.mapped(dst, 0, layout_.total) : nullptr;
    any_put = any_put || (routing.is_active(dst) && peer_base_[dst] == nullptr);
  }
  if (any_put) {
    header_staging_.resize(static_cast<std::size_t>(routing.num_ranks) * E * T);
    if (fp8) scale_staging_.resize(header_staging_.size() * nblocks);
  }

  for (int i = 0; i < num_tokens; ++i) {
    const uint16_t* row = x + static_cast<std::size_t>(i) * H;
    // A message's body is the same for all K selections of a token: cast it once, into a
    // staging row that stays valid until the flush (put() reads it then). BF16 bodies are
    // the row itself.
    const std::byte* body = reinterpret_cast<const std::byte*>(row);
    bool cast = !fp8;
    for (int k = 0; k < K; ++k) {
      const int64_t g = kept_expert(topk_idx[static_cast<std::size_t>(i) * K + k], E, routing);
      if (g < 0) continue;
      const int dst = static_cast<int>(g / E), e = static_cast<int>(g % E);
      const int j = send_counts_[g]++;
      if (!cast) {
        auto* q = reinterpret_cast<uint8_t*>(staging_.data() + static_cast<std::size_t>(i) * body_bytes);
        cast_row_fp8_dispatched(row, H, q, reinterpret_cast<float*>(q + H));
        body = reinterpret_cast<const std::byte*>(q);
        cast = true;
      }
      const std::size_t slot = (static_cast<std::size_t>(e) * R + me) * T + j;
      if (local != nullptr && dst == me) {  // fused dispatch: straight into this rank's outputs
        local->recv_src_token[slot] = i;
        local->recv_src_topk[slot] = k;
        std::memcpy(static_cast<std::byte*>(local->recv_x) + slot * area.x_row, body, area.x_row);
        if (fp8) std::memcpy(local->recv_scales + slot * nblocks, body + H, area.scales_row);
        continue;
      }
      const MessageHeader h{i, k, me, kMessageMagic ^ static_cast<int32_t>(f)};
      if (std::byte* base = peer_base_[dst]) {
        // A peer's rows: streamed (host_rows.hpp); own rows: cached for the expert that reads them next.
        if (dst != me)
          stream_row(base + area.x + slot * area.x_row, body, area.x_row);
        else
          std::memcpy(base + area.x + slot * area.x_row, body, area.x_row);
        if (fp8) std::memcpy(base + area.scales + slot * area.scales_row, body + H, area.scales_row);
        std::memcpy(base + area.headers + slot * sizeof h, &h, sizeof h);
      } else {
        transport_.put(dst, area.x + slot * area.x_row, body, area.x_row);
        const std::size_t staged = (static_cast<std::size_t>(dst) * E + e) * T + j;
        if (fp8) std::memcpy(scale_staging_.data() + staged * nblocks, body + H, area.scales_row);
        header_staging_[staged] = h;
      }
    }
  }
  const auto active = active_ranks();
  for (int dst : active) {
    if (peer_base_[dst] == nullptr)
      for (int e = 0; e < E; ++e) {
        const std::size_t n = static_cast<std::size_t>(send_counts_[static_cast<std::size_t>(dst) * E + e]);
        if (n == 0) continue;
        const std::size_t first = (static_cast<std::size_t>(e) * R + me) * T;
        const std::size_t staged = (static_cast<std::size_t>(dst) * E + e) * T;
        transport_.put(dst, area.headers + first * sizeof(MessageHeader), header_staging_.data() + staged,
                       n * sizeof(MessageHeader));
        if (fp8)
          transport_.put(dst, area.scales + first * area.scales_row, scale_staging_.data() + staged * nblocks,
                         n * area.scales_row);
      }
    transport_.put(dst, layout_.dispatch_counts + static_cast<std::size_t>(me) * E * sizeof(int32_t),
                   send_counts_.data() + static_cast<std::size_t>(dst) * E, E * sizeof(int32_t));
  }
  signal_active(active, layout_.dispatch_signals, "dispatch");
}

RegionRows HostBackend::region_rows(Format f) {
  const HostDispatchArea area = host_dispatch_area(shape_, layout_, f);
  std::byte* region = transport_.region().data();
  return RegionRows{region + area.x, f == Format::kFP8 ? reinterpret_cast<float*>(region + area.scales) : nullptr};
}

void HostBackend::receive_dispatch(const DispatchOutput& out, bool local_done) {
  const Shape& s = shape_;
  const auto active = active_ranks();
  const auto missing = transport_.wait_signals(active, layout_.dispatch_signals, epoch_, Clock::now() + timeout_);
  if (!missing.empty()) throw_missing("dispatch", missing);
  const int E = s.experts_per_rank, R = s.max_ranks, T = s.max_tokens;
  const int me = transport_.rank();
  const bool fp8 = format_ == Format::kFP8;
  const HostDispatchArea area = host_dispatch_area(s, layout_, format_);
  std::byte* region = transport_.region().data();
  const auto* counts = reinterpret_cast<const int32_t*>(region + layout_.dispatch_counts);
  const auto* headers = reinterpret_cast<const MessageHeader*>(region + area.headers);
  // Rows already in place when recv_x / recv_scales are the region's own arrays (region_rows).
  const bool copy_x = out.recv_x != region + area.x;
  const bool copy_scales = fp8 && reinterpret_cast<std::byte*>(out.recv_scales) != region + area.scales;
  const int32_t magic = kMessageMagic ^ static_cast<int32_t>(format_);
  for (int e = 0; e < E; ++e) {
    int32_t total = 0;
    for (int src = 0; src < R; ++src) {
      const int32_t n = routing_.is_active(src) ? counts[static_cast<std::size_t>(src) * E + e] : 0;
      if (n < 0 || n > T)
        throw Error(fmt::format("EP dispatch: rank {} got a count of {} from rank {} for local expert {} (max {})",
                                transport_.rank(), n, src, e, T));
      out.layout_count[static_cast<std::size_t>(e) * R + src] = n;
      total += n;
      if (n == 0 || (local_done && src == me)) continue;
      const std::size_t first = (static_cast<std::size_t>(e) * R + src) * T;
      for (int j = 0; j < n; ++j) {
        MessageHeader h;
        std::memcpy(&h, headers + first + j, sizeof h);
        if (h.magic != magic || h.src_rank != src || h.src_token < 0 || h.src_token >= T || h.src_topk < 0 ||
            h.src_topk >= s.topk)
          throw Error(fmt::format(
              "EP dispatch: rank {}: corrupt message {} from rank {} for local expert {} "
              "(magic {:#x}, src_rank {}, token {}, topk {})",
              transport_.rank(), j, src, e, static_cast<uint32_t>(h.magic), h.src_rank, h.src_token, h.src_topk));
        out.recv_src_token[first + j] = h.src_token;
        out.recv_src_topk[first + j] = h.src_topk;
      }
      // A block's rows are contiguous in the region and in recv_x: one copy each.
      if (copy_x)
        std::memcpy(static_cast<std::byte*>(out.recv_x) + first * area.x_row, region + area.x + first * area.x_row,
                    n * area.x_row);
      if (copy_scales)
        std::memcpy(reinterpret_cast<std::byte*>(out.recv_scales) + first * area.scales_row,
                    region + area.scales + first * area.scales_row, n * area.scales_row);
    }
    out.recv_count[e] = total;
  }
}

void HostBackend::combine_send(const uint16_t* expert_out, const DispatchOutput& handle) {
  send_combine(expert_out, handle, false);
}
void HostBackend::combine_recv(const int64_t* topk_idx, const float* topk_weights, int num_tokens, uint16_t* out) {
  receive_combine(topk_idx, topk_weights, num_tokens, out, nullptr);
}
void HostBackend::combine(const uint16_t* expert_out, const DispatchOutput& handle, const int64_t* topk_idx,
                          const float* topk_weights, int num_tokens, uint16_t* out) {
  send_combine(expert_out, handle, true);
  // The rows of this rank's own tokens stay in expert_out; the reduction reads them there.
  const Shape& s = shape_;
  const int E = s.experts_per_rank, H = s.hidden, R = s.max_ranks, T = s.max_tokens, K = s.topk;
  const int me = transport_.rank();
  std::fill(local_rows_.begin(), local_rows_.end(), nullptr);
  for (int e = 0; e < E; ++e) {
    const int n = handle.layout_count[static_cast<std::size_t>(e) * R + me];
    for (int j = 0; j < n; ++j) {
      const std::size_t row = (static_cast<std::size_t>(e) * R + me) * T + j;
      const int32_t tok = handle.recv_src_token[row], k = handle.recv_src_topk[row];
      if (tok < 0 || tok >= T || k < 0 || k >= K)
        throw Error(
            fmt::format("EP combine: rank {}: the dispatch handle's row {} names token {}, top-k {} (bad handle)", me,
                        row, tok, k));
      local_rows_[static_cast<std::size_t>(tok) * K + k] = expert_out + row * H;
    }
  }
  receive_combine(topk_idx, topk_weights, num_tokens, out, local_rows_.data());
}

void HostBackend::send_combine(const uint16_t* expert_out, const DispatchOutput& handle, bool skip_local) {
  const Shape& s = shape_;
  const int E = s.experts_per_rank, H = s.hidden, R = s.max_ranks, T = s.max_tokens, K = s.topk;
  const int me = transport_.rank();
  const std::size_t row_bytes = static_cast<std::size_t>(H) * 2;
  for (int src = 0; src < routing_.num_ranks; ++src)
    peer_base_[src] = routing_.is_active(src) ? transport_.mapped(src, 0, layout_.total) : nullptr;
  for (int e = 0; e < E; ++e) {
    for (int src = 0; src < routing_.num_ranks; ++src) {
      if (!routing_.is_active(src) || (skip_local && src == me)) continue;
      const int n = handle.layout_count[static_cast<std::size_t>(e) * R + src];
      std::byte* base = peer_base_[src];
      for (int j = 0; j < n; ++j) {
        const std::size_t row = (static_cast<std::size_t>(e) * R + src) * T + j;
        const int32_t tok = handle.recv_src_token[row], k = handle.recv_src_topk[row];
        if (tok < 0 || tok >= T || k < 0 || k >= K)  // the stores below are not bounds-checked
          throw Error(
              fmt::format("EP combine: rank {}: the dispatch handle's row {} names token {}, top-k {} (bad handle)", me,
                          row, tok, k));
        const std::size_t dst_row = static_cast<std::size_t>(tok) * K + k;
        const std::size_t off = layout_.combine_data + dst_row * row_bytes;
        if (base != nullptr && src != me)
          stream_row(base + off, expert_out + row * H, row_bytes);
        else if (base != nullptr)
          std::memcpy(base + off, expert_out + row * H, row_bytes);
        else
          transport_.put(src, off, expert_out + row * H, row_bytes);
      }
    }
  }
  signal_active(active_ranks(), layout_.combine_signals, "combine");
}

void HostBackend::receive_combine(const int64_t* topk_idx, const float* topk_weights, int num_tokens, uint16_t* out,
                                  const uint16_t* const* local_rows) {
  const Shape& s = shape_;
  check_combine_call(s, num_tokens);
  const auto active = active_ranks();
  const auto missing = transport_.wait_signals(active, layout_.combine_signals, epoch_, Clock::now() + timeout_);
  if (!missing.empty()) throw_missing("combine", missing);
  const int K = s.topk, H = s.hidden, E = s.experts_per_rank;
  const auto* data = reinterpret_cast<const uint16_t*>(transport_.region().data() + layout_.combine_data);
  for (int i = 0; i < num_tokens; ++i) {
    for (int k = 0; k < K; ++k) {
      const std::size_t sel = static_cast<std::size_t>(i) * K + k;
      const uint16_t* local = local_rows != nullptr ? local_rows[sel] : nullptr;
      rows_[k] = kept_expert(topk_idx[sel], E, routing_) < 0 ? nullptr : local != nullptr ? local : data + sel * H;
    }
    combine_row_dispatched(rows_.data(), topk_weights + static_cast<std::size_t>(i) * K, K, H,
                           out + static_cast<std::size_t>(i) * H);
  }
}

}  // namespace hyrun::ep
