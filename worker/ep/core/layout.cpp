#include "hyrun/ep/layout.hpp"

#include <fmt/format.h>

#include "hyrun/common/error.hpp"

namespace hyrun::ep {

const char* to_string(Format f) { return f == Format::kFP8 ? "fp8" : "bf16"; }

void Shape::validate() const {
  auto bad = [](const std::string& what) { throw UsageError("EP shape: " + what); };
  if (max_ranks < 1) bad(fmt::format("max_ranks must be >= 1, got {}", max_ranks));
  if (max_tokens < 1) bad(fmt::format("max_tokens must be >= 1, got {}", max_tokens));
  if (hidden < kScaleBlock || hidden % kScaleBlock != 0)
    bad(fmt::format("hidden must be a positive multiple of {}, got {}", kScaleBlock, hidden));
  if (topk < 1) bad(fmt::format("topk must be >= 1, got {}", topk));
  if (experts_per_rank < 1) bad(fmt::format("experts_per_rank must be >= 1, got {}", experts_per_rank));
}

std::string Shape::describe() const {
  return fmt::format("max_ranks={} max_tokens={} hidden={} topk={} experts_per_rank={}", max_ranks, max_tokens, hidden,
                     topk, experts_per_rank);
}

namespace {
std::size_t align64(std::size_t n) { return (n + 63) / 64 * 64; }
}  // namespace

RegionLayout region_layout(const Shape& s) {
  s.validate();
  RegionLayout l;
  const std::size_t R = s.max_ranks, T = s.max_tokens, H = s.hidden, K = s.topk, E = s.experts_per_rank;
  l.slot_bytes = dispatch_slot_bytes(s.hidden);  // 16 + 2H: a multiple of 256 plus 16, 16-aligned
  std::size_t off = 0;
  l.dispatch_data = off;
  off = align64(off + E * R * T * l.slot_bytes);
  l.dispatch_counts = off;
  off = align64(off + R * E * sizeof(int32_t));
  l.combine_data = off;
  off = align64(off + T * K * H * 2);
  l.dispatch_signals = off;
  off = align64(off + R * sizeof(uint64_t));
  l.combine_signals = off;
  off = align64(off + R * sizeof(uint64_t));
  l.total = off;
  return l;
}

std::size_t dispatch_bytes_per_selection(int hidden, Format f) {
  return f == Format::kFP8 ? static_cast<std::size_t>(hidden) + static_cast<std::size_t>(hidden / 128) * 4 + 16
                           : static_cast<std::size_t>(hidden) * 2;
}
std::size_t combine_bytes_per_selection(int hidden) { return static_cast<std::size_t>(hidden) * 2; }

std::size_t count_valid_selections(const int64_t* topk_idx, int num_tokens, int topk, int experts_per_rank,
                                   int num_ranks, const uint8_t* active) {
  std::size_t n = 0;
  const int64_t limit = static_cast<int64_t>(num_ranks) * experts_per_rank;
  for (int i = 0; i < num_tokens * topk; ++i) {
    const int64_t g = topk_idx[i];
    if (g < 0 || g >= limit) continue;
    if (active != nullptr && active[g / experts_per_rank] == 0) continue;
    ++n;
  }
  return n;
}

std::size_t dispatch_bytes(std::size_t valid, int hidden, Format f) {
  return valid * dispatch_bytes_per_selection(hidden, f);
}
std::size_t combine_bytes(std::size_t valid, int hidden) { return valid * combine_bytes_per_selection(hidden); }

double bandwidth_gbps(std::size_t d, std::size_t c, double avg_seconds) {
  if (!(avg_seconds > 0)) return 0.0;
  return static_cast<double>(d + c) / 1e9 / avg_seconds;
}

}  // namespace hyrun::ep
