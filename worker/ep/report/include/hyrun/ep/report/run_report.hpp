#pragma once
// The files ep-bench leaves in --report-dir: results.json (schema in docs/ep-bench.md), plan.json
// (the plan as run) and bandwidth.png (gnuplot; with its bandwidth.gp script and .dat data files).
// The report directory must be one only its owner, the user running ep-bench, can change
// names in (docs/security.md); it is checked on the descriptor every file is then written
// through. Each file is written atomically (a new temporary file under an unguessable name,
// O_EXCL | O_NOFOLLOW, then renameat), so a reader never sees half a file and no file is written
// through a symlink. gnuplot reads its script on its stdin and draws into a private directory.
// A missing or failing gnuplot gives a warning (spdlog and ReportFiles::plot_warning), never an error.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hyrun/ep/plan/elastic_plan.hpp"
#include "hyrun/ep/report/phase_sample.hpp"

namespace hyrun::ep::report {

/// The options the run used (ep-bench's command line; defaults are the reference's).
struct RunParameters {
  int world_size = 0;  ///< ranks hyrun started
  int num_tokens = 128;
  int hidden_dim = 7168;
  int num_topk = 8;
  int num_experts_per_rank = 2;
  int timeout_ms = 30000;
  bool disable_ll_nvlink = false;
  bool validate_phase_failures = false;
  std::string backend = "auto";        ///< auto | cuda | host (what was asked)
  std::string dispatch_dtype = "fp8";  ///< fp8 | bf16
  int warmup = 50;
  int iters = 50;
  bool validate = false;
  std::uint64_t seed = 0;
};

struct RunResults {
  RunParameters parameters;
  ElasticPlan plan;
  std::vector<PhaseSample> samples;                      ///< every (phase, rank) sample, any order
  std::vector<std::optional<double>> phase_duration_ms;  ///< per phase, rank 0's wall time; may be shorter or empty
};

/// The results.json document (pretty-printed, ends with a newline).
std::string results_json(const RunResults& results);

/// Writes `content` to the file `name` of the directory open as `dir_fd` (shown as `dir` in
/// errors) through a new temporary file (unguessable name, O_CREAT | O_EXCL | O_NOFOLLOW) in
/// it, fsync and renameat: a symlink at `name` is replaced, never followed. The file is 0644.
/// Throws hyrun::SystemError naming the file.
void write_file_atomically(int dir_fd, const std::filesystem::path& dir, std::string_view name,
                           std::string_view content);

struct ReportOptions {
  bool plot = true;                 ///< false: no plot files at all
  std::string gnuplot = "gnuplot";  ///< program run (PATH lookup) to draw bandwidth.png
};

struct ReportFiles {
  std::filesystem::path results_json;
  std::filesystem::path plan_json;
  std::filesystem::path plot_png;  ///< set when the plot was drawn
  std::string plot_warning;        ///< why there is no plot (empty when drawn or not asked for)
};

/// Checks, before a run, that the report can be written: creates `dir` if needed (0755; its
/// parents as any mkdir -p), refuses a directory another user could change names in (not owned
/// by the effective user, or group- or other-writable without the sticky bit) and creates and
/// removes a file in it. A symlink at `dir` is followed once if it is the user's (or root's).
/// Throws hyrun::UsageError naming --report-dir, `dir`, what is wrong and what would be right.
void check_report_dir(const std::filesystem::path& dir);

/// Creates `dir` if needed and writes results.json, plan.json and the plot files into it, all
/// through one descriptor of `dir` checked as check_report_dir checks it.
/// Throws hyrun::UsageError for a directory it refuses, hyrun::SystemError when the directory
/// or the JSON files cannot be written.
ReportFiles write_report(const std::filesystem::path& dir, const RunResults& results,
                         const ReportOptions& options = {});

}  // namespace hyrun::ep::report
