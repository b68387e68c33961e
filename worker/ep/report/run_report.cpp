#include "hyrun/ep/report/run_report.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "hyrun/common/error.hpp"

extern char** environ;

namespace hyrun::ep::report {
namespace {

using nlohmann::json;

json optional_number(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json sample_json(const PhaseSample& s) {
  json j;
  j["rank"] = s.rank;
  j["node"] = s.node;
  j["local_rank"] = s.local_rank;
  j["state"] = std::string(to_string(s.state));
  if (s.bandwidth) {
    j["gbps"] = s.bandwidth->gbps;
    j["avg_us"] = s.bandwidth->avg_us;
    j["min_us"] = s.bandwidth->min_us;
    j["max_us"] = s.bandwidth->max_us;
  } else {
    j["gbps"] = j["avg_us"] = j["min_us"] = j["max_us"] = nullptr;
  }
  if (s.split) {
    j["dispatch_gbps"] = s.split->dispatch_gbps;
    j["dispatch_avg_us"] = s.split->dispatch_avg_us;
    j["combine_gbps"] = s.split->combine_gbps;
    j["combine_avg_us"] = s.split->combine_avg_us;
  } else {
    j["dispatch_gbps"] = j["dispatch_avg_us"] = j["combine_gbps"] = j["combine_avg_us"] = nullptr;
  }
  j["join_ms"] = optional_number(s.join_ms);
  j["detect_ms"] = optional_number(s.detect_ms);
  j["detected_ranks"] = s.detected_ranks;
  return j;
}

// Largest of one optional field over a phase's samples.
template <typename Get>
std::optional<double> phase_max(const std::vector<const PhaseSample*>& samples, Get get) {
  std::optional<double> best;
  for (const auto* s : samples)
    if (auto v = get(*s)) best = best ? std::max(*best, *v) : *v;
  return best;
}

std::map<int, std::vector<const PhaseSample*>> by_phase(const std::vector<PhaseSample>& samples) {
  std::map<int, std::vector<const PhaseSample*>> out;
  for (const auto& s : samples) out[s.phase].push_back(&s);
  for (auto& [_, v] : out)
    std::sort(v.begin(), v.end(),
              [](auto* a, auto* b) { return std::tie(a->rank, a->node) < std::tie(b->rank, b->node); });
  return out;
}

std::optional<double> phase_mean_gbps(const std::vector<const PhaseSample*>& samples) {
  double sum = 0;
  int n = 0;
  for (const auto* s : samples)
    if (s->bandwidth) {
      sum += s->bandwidth->gbps;
      ++n;
    }
  if (n == 0) return std::nullopt;
  return sum / n;
}

// A gnuplot single-quoted string: only the quote itself needs doubling.
std::string gp_quote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'')
      out += "''";
    else if (c != '\n')
      out += c;
  }
  return out + "'";
}

// Creates an empty file, readable by all (0644), beside `path` under a unique name
// (".<name>.XXXXXX", O_EXCL); returns its path. The caller renames or removes it.
std::filesystem::path new_temporary_file(const std::filesystem::path& path) {
  std::string name = (path.parent_path() / fmt::format(".{}.XXXXXX", path.filename().string())).string();
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) throw SystemError(fmt::format("creating a temporary file for {}", path.string()), errno);
  ::fchmod(fd, 0644);  // mkostemp's 0600 would hide the report from the other users it is for
  ::close(fd);
  return name;
}

std::string gp_value(const std::optional<double>& v) { return v ? fmt::format("{}", *v) : "-"; }

// Runs gnuplot on `script`; returns "" on success, otherwise why not.
// It runs in the script's directory: the script names its files relative to it.
std::string run_gnuplot(const std::string& program, const std::filesystem::path& script,
                        const std::filesystem::path& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const std::string dir = script.parent_path().empty() ? std::string(".") : script.parent_path().string();
  posix_spawn_file_actions_addchdir_np(&actions, dir.c_str());
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  const std::string log_name = log.filename().string();  // log lies beside the script
  // A fresh log (the old one, or a link planted in its place, is removed first; O_EXCL
  // fails rather than follow a link planted again in between).
  std::error_code ignored;
  std::filesystem::remove(log, ignored);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::string script_arg = script.filename().string();
  std::string program_arg = program;
  char* argv[] = {program_arg.data(), script_arg.data(), nullptr};
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, program.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return fmt::format("cannot run '{}': {} (install gnuplot-nox, see scripts/install-deps.sh)", program,
                       std::strerror(rc));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return fmt::format("waiting for '{}': {}", program, std::strerror(errno));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  const std::string how = WIFEXITED(status) ? fmt::format("exited with status {}", WEXITSTATUS(status))
                                            : fmt::format("was killed by signal {}", WTERMSIG(status));
  return fmt::format("'{} {}' {}; its output is in {}", program, script.string(), how, log.string());
}

std::string plot_files(const std::filesystem::path& dir, const RunResults& r, const ReportOptions& options,
                       std::filesystem::path& png) {
  const auto bandwidth_dat = dir / "bandwidth.dat";
  const auto transitions_dat = dir / "transitions.dat";
  const auto script = dir / "bandwidth.gp";
  const auto image = dir / "bandwidth.png";
  const auto num_phases = r.plan.num_phases();

  // One gnuplot data block (index) per rank: "phase gbps" rows.
  std::map<int, std::vector<std::pair<int, double>>> per_rank;
  for (const auto& s : r.samples)
    if (s.bandwidth) per_rank[s.rank].emplace_back(s.phase, s.bandwidth->gbps);
  std::string data = "# ep-bench: dispatch + combine bandwidth (logical GB/s); one block per rank: phase gbps\n";
  std::string rank_words;
  for (auto& [rank, points] : per_rank) {
    std::sort(points.begin(), points.end());
    data += fmt::format("# rank {}\n", rank);
    for (std::size_t i = 0; i < points.size(); ++i) {
      // A blank line breaks the line: a rank absent from a phase must not look measured there.
      if (i > 0 && points[i].first != points[i - 1].first + 1) data += "\n";
      data += fmt::format("{} {}\n", points[i].first, points[i].second);
    }
    data += "\n\n";
    rank_words += fmt::format("{}{}", rank_words.empty() ? "" : " ", rank);
  }
  write_file_atomically(bandwidth_dat, data);

  const auto phases = by_phase(r.samples);
  std::string transitions = "# phase max_join_ms max_detect_ms ('-' = none)\n";
  bool any_transition = false;
  for (std::size_t p = 0; p < num_phases; ++p) {
    std::optional<double> join, detect;
    if (auto it = phases.find(static_cast<int>(p)); it != phases.end()) {
      join = phase_max(it->second, [](const PhaseSample& s) { return s.join_ms; });
      detect = phase_max(it->second, [](const PhaseSample& s) { return s.detect_ms; });
    }
    any_transition = any_transition || join || detect;
    transitions += fmt::format("{} {} {}\n", p, gp_value(join), gp_value(detect));
  }
  write_file_atomically(transitions_dat, transitions);

  std::string title = "ep-bench plan " + r.plan.to_json();
  if (title.size() > 100) title = title.substr(0, 97) + "...";
  std::string gp;
  gp += "# Drawn by ep-bench; rerun with: gnuplot bandwidth.gp\n";
  gp += "set terminal png size 1100,900\n";
  // gnuplot opens its output by name and would follow a planted link: it writes into a new
  // file of ours instead, renamed into place afterwards. bandwidth.gp names the real file.
  const auto image_tmp = new_temporary_file(image);
  struct RemoveUnlessRenamed {
    std::filesystem::path path;
    ~RemoveUnlessRenamed() {
      std::error_code ignored;
      std::filesystem::remove(path, ignored);
    }
  } image_tmp_guard{image_tmp};
  gp += fmt::format("set output {}\n", gp_quote(image.filename().string()));
  gp += "set datafile missing '-'\n";
  gp += fmt::format("set multiplot layout 2,1 title {}\n", gp_quote(title));
  gp += "set grid\nset xtics 1\n";
  gp += fmt::format("set xrange [-0.5:{}]\n", static_cast<double>(num_phases) - 0.5);
  gp += "set xlabel 'phase'\nset key outside right\n";
  gp += "set title 'Dispatch + combine bandwidth per phase and rank (logical GB/s)'\nset ylabel 'GB/s'\n";
  if (rank_words.empty()) {
    gp +=
        "set yrange [0:1]\nset label 1 'no bandwidth measured' at graph 0.5, 0.5 center\nplot -1 notitle\nunset label 1\nset autoscale y\n";
  } else {
    gp += fmt::format("ranks = '{}'\n", rank_words);
    gp += fmt::format(
        "plot for [i=1:words(ranks)] {} index (i-1) using 1:2 with linespoints title 'rank '.word(ranks, i)\n",
        gp_quote(bandwidth_dat.filename().string()));
  }
  gp += "set title 'Phase transitions (largest over ranks)'\nset ylabel 'ms'\n";
  if (!any_transition) {
    gp += "set yrange [0:1]\nset label 1 'no joins or detected failures' at graph 0.5, 0.5 center\nplot -1 notitle\n";
  } else {
    gp += "set yrange [0:*]\nset style fill solid 0.6\nset boxwidth 0.3\n";
    gp += fmt::format(
        "plot {0} using ($1-0.15):2 with boxes title 'join ms', {0} using ($1+0.15):3 with boxes title 'failure detection ms'\n",
        gp_quote(transitions_dat.filename().string()));
  }
  gp += "unset multiplot\n";
  write_file_atomically(script, gp);
  // The script run now differs from the one kept only in its output name.
  const auto run_script = new_temporary_file(script);
  RemoveUnlessRenamed run_script_guard{run_script};
  std::string run_gp = gp;
  const std::string kept_output = fmt::format("set output {}\n", gp_quote(image.filename().string()));
  run_gp.replace(run_gp.find(kept_output), kept_output.size(),
                 fmt::format("set output {}\n", gp_quote(image_tmp.filename().string())));
  write_file_atomically(run_script, run_gp);

  std::filesystem::remove(image);  // a stale image must not pass for this run's
  if (auto why = run_gnuplot(options.gnuplot, run_script, dir / "gnuplot.log"); !why.empty()) return why;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(image_tmp, ec) || std::filesystem::file_size(image_tmp, ec) == 0) {
    return fmt::format("gnuplot ran but wrote no {}; see {}", image.string(), (dir / "gnuplot.log").string());
  }
  if (::rename(image_tmp.c_str(), image.c_str()) != 0)
    return fmt::format("renaming {} to {}: {}", image_tmp.string(), image.string(), std::strerror(errno));
  png = image;
  return "";
}

}  // namespace

std::string results_json(const RunResults& r) {
  const auto& p = r.parameters;
  json doc;
  doc["schema"] = "hyrun-ep-bench-results/1";
  doc["parameters"] = {
      {"world_size", p.world_size},
      {"num_tokens", p.num_tokens},
      {"hidden_dim", p.hidden_dim},
      {"num_topk", p.num_topk},
      {"num_experts_per_rank", p.num_experts_per_rank},
      {"num_experts", r.plan.num_experts(p.num_experts_per_rank)},
      {"timeout_ms", p.timeout_ms},
      {"disable_ll_nvlink", p.disable_ll_nvlink},
      {"validate_phase_failures", p.validate_phase_failures},
      {"backend", p.backend},
      {"dispatch_dtype", p.dispatch_dtype},
      {"warmup", p.warmup},
      {"iters", p.iters},
      {"validate", p.validate},
      {"seed", p.seed},
  };
  doc["plan"] = json::parse(r.plan.to_json());
  doc["plan_source"] = r.plan.source();
  doc["max_rank"] = r.plan.max_rank();
  doc["unused_ranks"] = r.plan.unused_ranks();
  doc["bandwidth_kind"] = "logical";
  doc["overall_mean_gbps"] = optional_number(overall_mean_gbps(r.samples));

  const auto phases = by_phase(r.samples);
  json phases_json = json::array();
  for (std::size_t i = 0; i < r.plan.num_phases(); ++i) {
    const PlanPhase& ph = r.plan.phase(i);
    json j;
    j["phase"] = i;
    j["entries"] = ph.entries;
    j["active"] = ph.active;
    j["killed"] = ph.killed;
    j["joining"] = ph.joining;
    j["leaving"] = ph.leaving;
    j["survivors"] = ph.survivors;
    j["new_processes"] = ph.new_processes;
    j["duration_ms"] = i < r.phase_duration_ms.size() ? optional_number(r.phase_duration_ms[i]) : json(nullptr);
    static const std::vector<const PhaseSample*> kNone;
    auto it = phases.find(static_cast<int>(i));
    const auto& samples = it == phases.end() ? kNone : it->second;
    j["max_join_ms"] = optional_number(phase_max(samples, [](const PhaseSample& s) { return s.join_ms; }));
    j["max_detect_ms"] = optional_number(phase_max(samples, [](const PhaseSample& s) { return s.detect_ms; }));
    j["mean_gbps"] = optional_number(phase_mean_gbps(samples));
    json sample_list = json::array();
    for (const auto* s : samples) sample_list.push_back(sample_json(*s));
    j["samples"] = std::move(sample_list);
    phases_json.push_back(std::move(j));
  }
  doc["phases"] = std::move(phases_json);
  // Samples of phases the plan does not have would be a runtime bug; keep them visible, not dropped.
  json stray = json::array();
  for (const auto& s : r.samples)
    if (s.phase < 0 || static_cast<std::size_t>(s.phase) >= r.plan.num_phases()) {
      stray.push_back(sample_json(s));
      stray.back()["phase"] = s.phase;
    }
  if (!stray.empty()) doc["samples_outside_plan"] = std::move(stray);
  return doc.dump(2) + "\n";
}

void write_file_atomically(const std::filesystem::path& path, std::string_view content) {
  // A new file under a name nobody can guess (mkostemp: O_CREAT | O_EXCL), so a link planted
  // in a shared directory is never written through; rename then replaces a link at `path`.
  const auto tmp = new_temporary_file(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw SystemError(fmt::format("opening {}", tmp.string()), err);
  }
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw SystemError(fmt::format("writing {}", tmp.string()), err);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw SystemError(fmt::format("flushing {}", tmp.string()), err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw SystemError(fmt::format("renaming {} to {}", tmp.string(), path.string()), err);
  }
}

void check_report_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  const auto status = std::filesystem::status(dir, ec);
  if (std::filesystem::exists(status) && !std::filesystem::is_directory(status))
    throw UsageError(
        fmt::format("--report-dir {}: it exists and is not a directory; name a directory (it is created "
                    "when missing)",
                    dir.string()));
  std::filesystem::create_directories(dir, ec);
  if (ec) throw UsageError(fmt::format("--report-dir {}: cannot create it: {}", dir.string(), ec.message()));
  // Writable? Ask the file system itself (permissions, a read-only mount, a full disk for
  // the directory entry): create a file and remove it.
  std::string probe = (dir / ".ep-bench-write-check.XXXXXX").string();
  const int fd = ::mkostemp(probe.data(), O_CLOEXEC);
  if (fd < 0)
    throw UsageError(fmt::format("--report-dir {}: cannot create files in it: {}", dir.string(), std::strerror(errno)));
  ::close(fd);
  ::unlink(probe.c_str());
}

ReportFiles write_report(const std::filesystem::path& dir, const RunResults& results, const ReportOptions& options) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw SystemError(fmt::format("creating report directory {}", dir.string()), ec.value());

  ReportFiles files;
  files.plan_json = dir / "plan.json";
  write_file_atomically(files.plan_json, results.plan.to_json() + "\n");
  files.results_json = dir / "results.json";
  write_file_atomically(files.results_json, results_json(results));

  if (options.plot) {
    try {
      files.plot_warning = plot_files(dir, results, options, files.plot_png);
    } catch (const std::exception& e) {
      files.plot_warning = e.what();
    }
    if (!files.plot_warning.empty()) {
      spdlog::warn("ep-bench: no bandwidth plot: {}; {} is complete", files.plot_warning, files.results_json.string());
    }
  }
  return files;
}

}  // namespace hyrun::ep::report
