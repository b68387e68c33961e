#pragma once
// The end-of-run summary rank 0 prints: one row per (node, rank), one mark per phase, bandwidth
// avg/min/max over the rank's phases, worst join and detection times, then the overall mean.
#include <cstddef>
#include <cstdio>
#include <span>
#include <string>

#include "hyrun/ep/report/phase_sample.hpp"

namespace hyrun::ep::report {

struct SummaryOptions {
  bool color = false;  ///< ANSI colours (green active/joined, red killed)

  /// Colours exactly when `out` is a terminal.
  static SummaryOptions for_stream(std::FILE* out);
};

/// The summary text, lines separated by '\n' and ending with one.
/// Rows are sorted by node, then rank. A phase with no sample for a row shows "left" when the row
/// ran (and was not killed) in the previous phase, "idle" otherwise; a sample's own state wins.
/// "GB/s avg/min/max" are over the row's phases that measured bandwidth; "join ms" and
/// "detect ms" are the largest over its phases; "-" marks no value.
std::string format_summary(std::span<const PhaseSample> samples, std::size_t num_phases,
                           const SummaryOptions& options = {});

}  // namespace hyrun::ep::report
