#pragma once
// The log lines ep-bench prints, byte for byte what the NIXL Elastic EP benchmark prints and what
// CloudAI's NixlEP workload parses. Each function returns one line WITHOUT the trailing newline;
// the caller prints it with '\n' and flushes (CloudAI reads the log while the job runs).
//
// Numbers must be finite: a "nan" or "inf" would not match CloudAI's regexes, so the bandwidth
// lines throw hyrun::Error naming the rank and the field instead of printing one.
#include <span>
#include <string>

namespace hyrun::ep::report {

/// "global_rank={g}, local_rank={l} -> start phase {p}"
std::string phase_start_line(int global_rank, int local_rank, int phase);
/// "global_rank={g}, local_rank={l} -> end phase {p}"  (CloudAI: `-> end phase (\d+)`)
std::string phase_end_line(int global_rank, int local_rank, int phase);

/// "global_rank={g}, local_rank={l} -> adding connections to ranks [4, 5, 6, 7]"
std::string connections_added_line(int global_rank, int local_rank, std::span<const int> ranks);
/// "global_rank={g}, local_rank={l} -> removing connections to ranks [6]"
std::string connections_removed_line(int global_rank, int local_rank, std::span<const int> ranks);
/// "global_rank={g}, local_rank={l} -> detected failed ranks [6] in 12.3 ms"
std::string failed_ranks_detected_line(int global_rank, int local_rank, std::span<const int> ranks, double detect_ms);

/// "global_rank={g}, local_rank={l} -> no phase of the plan uses this rank; exiting with status 0"
/// (printed by a world rank the plan never uses; deliberately not CloudAI's failure text
/// "no plan phases were found for rank", since an unused rank is not a failure).
std::string unused_rank_line(int global_rank, int local_rank);

/// Dispatch + combine timing of one rank in one phase (microseconds; GB/s = 1e9 bytes per second).
struct BandwidthStats {
  double gbps = 0;
  double avg_us = 0;
  double min_us = 0;
  double max_us = 0;
};

/// A bandwidth in GB/s as every line prints it: two decimals (the reference's format), and
/// three significant digits below 1 GB/s, so that a slow phase never reads 0.00 (CloudAI takes
/// that for no bandwidth). Always plain decimals, which CloudAI's regex reads.
std::string gbps_text(double gbps);

/// "[rank {r}] Dispatch + combine bandwidth: {gbps} GB/s, avg_t={:.2f} us, min_t={:.2f} us, max_t={:.2f} us"
std::string bandwidth_line(int rank, const BandwidthStats& stats);

/// Dispatch and combine measured separately.
struct SplitBandwidth {
  double dispatch_gbps = 0;
  double dispatch_avg_us = 0;
  double combine_gbps = 0;
  double combine_avg_us = 0;
};

/// "[rank {r}] Dispatch bandwidth: {gbps} GB/s, avg_t={:.2f} us | Combine bandwidth: {gbps} GB/s, avg_t={:.2f} us"
std::string split_bandwidth_line(int rank, const SplitBandwidth& split);

}  // namespace hyrun::ep::report
