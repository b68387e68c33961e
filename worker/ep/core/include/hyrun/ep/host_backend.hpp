#pragma once
// Low-latency EP dispatch and combine on the host (runs anywhere), built on the shared
// per-token functions (per_token.hpp) and a one-sided Transport (transport.hpp).
//
// The calls' semantics and vocabulary: ep_call.hpp.
#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "hyrun/ep/ep_call.hpp"
#include "hyrun/ep/layout.hpp"
#include "hyrun/ep/transport.hpp"

namespace hyrun::ep {

/// Owns the same-size std::vectors for a DispatchOutput (host convenience, tests).
struct DispatchBuffers {
  DispatchBuffers(const Shape& s, Format f);
  std::vector<uint8_t> recv_x;
  std::vector<float> recv_scales;
  std::vector<int32_t> recv_src_token, recv_src_topk, layout_count, recv_count;
  DispatchOutput view();
  /// Fills every output with garbage: 0xFF bytes (FP8 NaN, bf16 NaN) and NaN scales.
  void poison();
};

class HostBackend {
 public:
  /// `transport.region()` must hold region_bytes(shape) bytes, zeroed before first use.
  HostBackend(const Shape& shape, Transport& transport, std::chrono::milliseconds timeout);

  const Shape& shape() const { return shape_; }
  uint64_t epoch() const { return epoch_; }
  /// Epoch of the last call; the next dispatch uses epoch()+1. Every rank of a call must
  /// use the same epoch, and epochs must grow over the whole job (the signal words keep
  /// the last epoch each source wrote). Ranks that start together need nothing; when
  /// ranks join (elastic phase change), every rank calls set_epoch with an agreed value
  /// above every epoch used so far, e.g. (uint64_t(phase) << 32).
  void set_epoch(uint64_t epoch) { epoch_ = epoch; }

  /// DeepEP's packed_recv_x: the arrays of this rank's region where the senders store the
  /// payload rows and scales of format `f` (host_dispatch_area.hpp). A DispatchOutput
  /// whose recv_x / recv_scales are these pointers (the other fields stay caller-owned)
  /// receives without copying the rows; any other recv_x gets them copied. The rows of a
  /// dispatch stay valid until this rank calls combine_send / combine (from then on the
  /// peers may start the next dispatch into the region): read them before, or pass your
  /// own recv_x. Same results either way.
  RegionRows region_rows(Format f);

  /// Casts each token once (FP8) and writes its messages into the destination regions
  /// (stored directly where the transport maps the region, Transport::mapped; put
  /// otherwise), then counts and signals to every active rank. Inactive ranks get
  /// nothing. This rank must be active. A token's non-negative expert indices must be
  /// distinct (as top-k produces them); a repeat is a UsageError.
  void dispatch_send(const uint16_t* x, const int64_t* topk_idx, int num_tokens, const Routing& routing, Format f);
  /// Waits for every active rank's dispatch signal, then unpacks into `out`.
  void dispatch_recv(const DispatchOutput& out);
  /// dispatch_send + dispatch_recv, with this rank's own messages written straight into
  /// `out` instead of through the region (same results). After an exception `out` is
  /// unspecified.
  void dispatch(const uint16_t* x, const int64_t* topk_idx, int num_tokens, const Routing& routing, Format f,
                const DispatchOutput& out);

  /// Puts every received row's expert output back to its source rank, then signals.
  /// `handle` is the DispatchOutput of the last dispatch. `expert_out` may be reused
  /// when the call returns.
  void combine_send(const uint16_t* expert_out, const DispatchOutput& handle);
  /// Waits for every active rank's combine signal, then reduces into out [num_tokens, H].
  /// topk_idx / topk_weights are this rank's dispatch inputs.
  void combine_recv(const int64_t* topk_idx, const float* topk_weights, int num_tokens, uint16_t* out);
  /// combine_send + combine_recv, with the rows of this rank's own tokens reduced
  /// straight from `expert_out` instead of copied through the region (same results).
  void combine(const uint16_t* expert_out, const DispatchOutput& handle, const int64_t* topk_idx,
               const float* topk_weights, int num_tokens, uint16_t* out);

 private:
  std::vector<int> active_ranks() const;
  /// Flushes the data, signals `active` at `signals`, flushes; throws after signalling.
  void signal_active(const std::vector<int>& active, std::size_t signals, const char* what);
  /// PeerFailureError naming the missing ranks known failed, when there are any (the others
  /// are not blamed); else PeerTimeoutError naming every missing rank.
  [[noreturn]] void throw_missing(const char* what, const std::vector<int>& missing);
  /// dispatch_send; `local` (fused dispatch): this rank's own messages go there directly.
  void send_dispatch(const uint16_t* x, const int64_t* topk_idx, int num_tokens, const Routing& routing, Format f,
                     const DispatchOutput* local);
  /// dispatch_recv; `local_done`: rows from this rank are already in `out`.
  void receive_dispatch(const DispatchOutput& out, bool local_done);
  /// combine_send; `skip_local`: rows for this rank's own tokens are not copied.
  void send_combine(const uint16_t* expert_out, const DispatchOutput& handle, bool skip_local);
  /// combine_recv; `local_rows`: per selection [T*K], the row of a local selection (else nullptr).
  void receive_combine(const int64_t* topk_idx, const float* topk_weights, int num_tokens, uint16_t* out,
                       const uint16_t* const* local_rows);
  Shape shape_;
  Transport& transport_;
  std::chrono::milliseconds timeout_;
  RegionLayout layout_;
  uint64_t epoch_ = 0;
  Routing routing_;  // of the current epoch
  Format format_ = Format::kFP8;
  std::vector<std::byte> staging_;             // [T] each token's FP8 codes + scales, cast once for its K messages
  std::vector<MessageHeader> header_staging_;  // [num_ranks][E][T] headers for peers reached by put()
  std::vector<float> scale_staging_;           // [num_ranks][E][T][H/128] scales for peers reached by put()
  std::vector<std::byte*> peer_base_;          // [num_ranks] the peer's mapped region, or nullptr (put)
  std::vector<int32_t> send_counts_;           // [num_ranks * E]
  std::vector<const uint16_t*> rows_;          // [K] one token's combine rows
  std::vector<const uint16_t*> local_rows_;    // [T * K] fused combine: rows in expert_out
};

}  // namespace hyrun::ep
