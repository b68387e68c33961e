// Buffer sizes and bandwidth accounting.
#include <gtest/gtest.h>

#include <vector>

#include "hyrun/common/error.hpp"
#include "hyrun/ep/layout.hpp"

using namespace hyrun::ep;

TEST(EpLayout, BytesPerSelectionMatchReference) {
  EXPECT_EQ(dispatch_bytes_per_selection(7168, Format::kFP8), 7168u + 7168 / 128 * 4 + 16);
  EXPECT_EQ(dispatch_bytes_per_selection(7168, Format::kBF16), 7168u * 2);
  EXPECT_EQ(combine_bytes_per_selection(7168), 7168u * 2);
  EXPECT_EQ(dispatch_bytes_per_selection(2048, Format::kFP8), 2048u + 64 + 16);
}

TEST(EpLayout, ValidSelectionsAndBandwidth) {
  // 3 tokens, top-2, 2 experts per rank, 3 ranks; rank 1 inactive.
  const std::vector<int64_t> idx = {0, 2, -1, 5, 3, 6 /* beyond 3*2 experts */};
  EXPECT_EQ(count_valid_selections(idx.data(), 3, 2, 2, 3, nullptr), 4u);
  const std::vector<uint8_t> active = {1, 0, 1};
  EXPECT_EQ(count_valid_selections(idx.data(), 3, 2, 2, 3, active.data()), 2u);  // 0 and 5
  const std::size_t d = dispatch_bytes(2, 7168, Format::kFP8), c = combine_bytes(2, 7168);
  EXPECT_EQ(d, 2u * (7168 + 224 + 16));
  EXPECT_EQ(c, 2u * 14336);
  EXPECT_DOUBLE_EQ(bandwidth_gbps(d, c, 1e-4), (d + c) / 1e9 / 1e-4);
  EXPECT_EQ(bandwidth_gbps(d, c, 0.0), 0.0);
  // The reference workload: 128 tokens, top-8, all valid, hidden 7168.
  const std::size_t sel = 128 * 8;
  EXPECT_EQ(dispatch_bytes(sel, 7168, Format::kFP8) + combine_bytes(sel, 7168), sel * (7408u + 14336u));
}

TEST(EpLayout, RegionLayoutIsAlignedAndSized) {
  Shape s{8, 128, 7168, 8, 2};
  const RegionLayout l = region_layout(s);
  EXPECT_EQ(l.slot_bytes, 16u + 2 * 7168);
  EXPECT_EQ(l.dispatch_data, 0u);
  EXPECT_GE(l.dispatch_counts, 2u * 8 * 128 * l.slot_bytes);
  EXPECT_GE(l.combine_data, l.dispatch_counts + 8 * 2 * 4);
  EXPECT_GE(l.dispatch_signals, l.combine_data + 128u * 8 * 7168 * 2);
  EXPECT_GE(l.combine_signals, l.dispatch_signals + 8 * 8);
  EXPECT_GE(l.total, l.combine_signals + 8 * 8);
  for (auto off : {l.dispatch_counts, l.combine_data, l.dispatch_signals, l.combine_signals, l.total})
    EXPECT_EQ(off % 64, 0u);
  EXPECT_EQ(region_bytes(s), l.total);
  EXPECT_EQ(send_staging_bytes(s), 128u * (7168 + 7168 / 128 * 4));  // each token cast once
  EXPECT_EQ(recv_rows(s), 2u * 8 * 128);
  EXPECT_EQ(recv_x_bytes(s, Format::kFP8), recv_rows(s) * 7168);
  EXPECT_EQ(recv_x_bytes(s, Format::kBF16), recv_rows(s) * 7168 * 2);
  EXPECT_EQ(recv_scales_count(s), recv_rows(s) * 56);
  EXPECT_EQ(expert_out_bytes(s), recv_rows(s) * 7168 * 2);
}

TEST(EpLayout, ShapeValidation) {
  EXPECT_THROW((Shape{0, 1, 128, 1, 1}.validate()), hyrun::UsageError);
  EXPECT_THROW((Shape{1, 1, 100, 1, 1}.validate()), hyrun::UsageError);
  EXPECT_THROW((Shape{1, 1, 128, 0, 1}.validate()), hyrun::UsageError);
  EXPECT_NO_THROW((Shape{1, 1, 128, 1, 1}.validate()));
}
