#include "hyrun/ep/report/run_report.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>

#include "hyrun/common/error.hpp"
#include "hyrun/common/unique_fd.hpp"
#include "hyrun/common/user_directory.hpp"

extern char** environ;

namespace hyrun::ep::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json optional_number(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

// Each of `fields` of `measured`, or null for every one when it is absent: a sample has the
// same keys whether or not its phase measured anything.
template <class T>
void put_or_null(json& j, const std::optional<T>& measured,
                 std::initializer_list<std::pair<const char*, double T::*>> fields) {
  for (const auto& [key, member] : fields) j[key] = measured ? json((*measured).*member) : json(nullptr);
}

json sample_json(const PhaseSample& s) {
  json j;
  j["rank"] = s.rank;
  j["node"] = s.node;
  j["local_rank"] = s.local_rank;
  j["state"] = std::string(to_string(s.state));
  put_or_null(j, s.bandwidth,
              {{"gbps", &BandwidthStats::gbps},
               {"avg_us", &BandwidthStats::avg_us},
               {"min_us", &BandwidthStats::min_us},
               {"max_us", &BandwidthStats::max_us}});
  put_or_null(j, s.split,
              {{"dispatch_gbps", &SplitBandwidth::dispatch_gbps},
               {"dispatch_avg_us", &SplitBandwidth::dispatch_avg_us},
               {"combine_gbps", &SplitBandwidth::combine_gbps},
               {"combine_avg_us", &SplitBandwidth::combine_avg_us}});
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

std::string gp_value(const std::optional<double>& v) { return v ? fmt::format("{}", *v) : "-"; }

// ---- Files in a directory named by its descriptor -------------------------------------
// Every file of the report is created under a new unguessable name (O_CREAT | O_EXCL |
// O_NOFOLLOW) and renamed into place relative to the directory's descriptor: nothing is ever
// opened through a name someone else could have turned into a symlink.

std::string random_name_part() {
  static constexpr std::string_view kAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  unsigned char bytes[12];
  if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes))
    throw SystemError("getrandom for a temporary file name", errno);
  std::string out;
  for (unsigned char b : bytes) out += kAlphabet[b % kAlphabet.size()];
  return out;
}

// A new, empty file ".<name>.<random>" in `dir_fd`; `tmp` receives its name.
UniqueFd create_temporary_at(int dir_fd, const fs::path& dir, std::string_view name, std::string& tmp) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    tmp = fmt::format(".{}.{}", name, random_name_part());
    UniqueFd fd(::openat(dir_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (fd) return fd;
    if (errno != EEXIST)
      throw SystemError(fmt::format("creating a temporary file for {}", (dir / name).string()), errno);
  }
  throw SystemError(fmt::format("creating a temporary file for {}", (dir / name).string()), EEXIST);
}

// Removes a temporary name on every path that does not rename it into place.
struct TemporaryName {
  int dir_fd;
  std::string name;
  ~TemporaryName() {
    if (!name.empty()) ::unlinkat(dir_fd, name.c_str(), 0);
  }
};

void write_all(int fd, std::string_view content, const fs::path& shown) {
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw SystemError(fmt::format("writing {}", shown.string()), errno);
    done += static_cast<std::size_t>(n);
  }
}

// The content of the regular file `name` in `dir_fd` (a link there is not followed);
// nullopt when there is no such file.
std::optional<std::string> read_file_at(int dir_fd, const char* name, const fs::path& shown) {
  UniqueFd fd(::openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd && errno == ENOENT) return std::nullopt;
  if (!fd) throw SystemError(fmt::format("opening {}", shown.string()), errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw SystemError(fmt::format("checking {}", shown.string()), errno);
  if (!S_ISREG(st.st_mode)) throw Error(fmt::format("{} is not a regular file", shown.string()));
  std::string out;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw SystemError(fmt::format("reading {}", shown.string()), errno);
    if (n == 0) return out;
    out.append(buffer, static_cast<std::size_t>(n));
  }
}

// ---- The report directory ----------------------------------------------------------------

// Refuses a directory another user could change files in while ep-bench writes them: its
// owner, or anyone its mode lets create and rename names (the sticky bit stops that).
void check_only_ours(int fd, const fs::path& dir, std::string_view label) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw SystemError(fmt::format("{} {}: checking it", label, dir.string()), errno);
  const auto why = others_can_change(st, ::geteuid(), StickyBit::kEnough);
  if (!why) return;
  if (why->reason == NotOnlyOurs::Reason::kOtherOwner)
    throw UsageError(fmt::format(
        "{} {}: {}: its owner could replace the report's files while ep-bench writes them; choose a directory you own "
        "(ep-bench creates a missing one)",
        label, dir.string(), why->what));
  throw UsageError(
      fmt::format("{} {}: {}: they could replace the report's files while ep-bench writes them; run 'chmod go-w {}' or "
                  "choose a directory only you can write",
                  label, dir.string(), why->what, dir.string()));
}

// `name` in `parent_fd` is not a directory (O_NOFOLLOW refused it): follows it once when it is
// a link of yours (or root's) to a directory; refuses anything else.
UniqueFd open_through_link(int parent_fd, const std::string& name, const fs::path& dir, std::string_view label) {
  struct stat link {};
  if (::fstatat(parent_fd, name.c_str(), &link, AT_SYMLINK_NOFOLLOW) != 0)
    throw SystemError(fmt::format("{} {}: checking it", label, dir.string()), errno);
  const std::string not_a_directory = fmt::format(
      "{} {}: it exists and is not a directory; name a directory (it is created when missing)", label, dir.string());
  if (!S_ISLNK(link.st_mode)) throw UsageError(not_a_directory);
  if (link.st_uid != ::geteuid() && link.st_uid != 0) {
    // Who owns a link decides where it leads: one planted by another user must not send the report elsewhere.
    throw UsageError(fmt::format(
        "{} {}: it is a symbolic link owned by uid {}, not by you (uid {}); remove it or name the directory itself",
        label, dir.string(), link.st_uid, ::geteuid()));
  }
  UniqueFd fd(::openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd && errno == ENOTDIR) throw UsageError(not_a_directory);
  if (!fd) throw SystemError(fmt::format("{} {}: opening the directory its link names", label, dir.string()), errno);
  spdlog::debug("{} {} is a symbolic link; the report goes into the directory it names", label, dir.string());
  return fd;
}

// Opens (creating it, 0755, when missing) the report directory and checks, on the descriptor
// returned and used for every write after, that no other user can change names in it.
// The directories above it are trusted, as in any path the user names.
UniqueFd open_report_dir(const fs::path& dir, std::string_view label) {
  fs::path path = dir.lexically_normal();
  if (!path.has_filename() && path.has_relative_path()) path = path.parent_path();  // "out/" names "out"
  const fs::path parent = !path.has_filename() ? path : path.has_parent_path() ? path.parent_path() : ".";
  const std::string name = path.has_filename() ? path.filename().string() : ".";
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) throw SystemError(fmt::format("{} {}: cannot create it", label, dir.string()), ec.value());
  const UniqueFd parent_fd(::open(parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!parent_fd) throw SystemError(fmt::format("{} {}: cannot create it", label, dir.string()), errno);
  if (::mkdirat(parent_fd.get(), name.c_str(), 0755) != 0 && errno != EEXIST)
    throw SystemError(fmt::format("{} {}: cannot create it", label, dir.string()), errno);
  UniqueFd fd(::openat(parent_fd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd && (errno == ELOOP || errno == ENOTDIR)) fd = open_through_link(parent_fd.get(), name, dir, label);
  if (!fd) throw SystemError(fmt::format("{} {}: cannot open it", label, dir.string()), errno);
  check_only_ours(fd.get(), dir, label);
  return fd;
}

// ---- gnuplot ---------------------------------------------------------------------------------

// A new directory only this user can enter (mkdtemp: mode 0700, a fresh name) where gnuplot
// runs and writes the image and its log; removed with what is in it.
class PrivateDirectory {
 public:
  PrivateDirectory() {
    std::string name = (fs::temp_directory_path() / "ep-bench-plot.XXXXXX").string();
    if (::mkdtemp(name.data()) == nullptr) throw SystemError(fmt::format("creating {}", name), errno);
    path_ = name;
    fd_.reset(::open(name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd_) {
      const int err = errno;
      ::rmdir(name.c_str());  // the destructor does not run for a constructor that throws
      throw SystemError(fmt::format("opening {}", name), err);
    }
    struct stat st {};
    if (::fstat(fd_.get(), &st) != 0 || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0)
      throw Error(fmt::format("{} is not the private directory mkdtemp made", name));  // a $TMPDIR others can write
  }
  ~PrivateDirectory() {
    // By name: nobody else can enter it, and its name in the (sticky) temporary directory is ours.
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  PrivateDirectory(const PrivateDirectory&) = delete;
  PrivateDirectory& operator=(const PrivateDirectory&) = delete;
  int fd() const { return fd_.get(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  UniqueFd fd_;
};

// SIGPIPE blocked on this thread while it writes to a child that may have stopped reading:
// the write fails with EPIPE instead of killing ep-bench. A SIGPIPE it raised is consumed.
class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeBlocked() {
    if (!was_pending_) {
      const timespec zero{};
      while (sigtimedwait(&pipe_, nullptr, &zero) == SIGPIPE) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

 private:
  sigset_t pipe_{}, old_{};
  bool was_pending_ = false;
};

struct SpawnActions {
  posix_spawn_file_actions_t actions;
  SpawnActions() { posix_spawn_file_actions_init(&actions); }
  ~SpawnActions() { posix_spawn_file_actions_destroy(&actions); }
  SpawnActions(const SpawnActions&) = delete;
  SpawnActions& operator=(const SpawnActions&) = delete;
};

// Runs `program` (no argument) with `script` on its stdin, in the directory `cwd_fd`, its
// stdout and stderr into `log_fd`; returns "" on success, otherwise why not. gnuplot is given
// no name at all: what it runs cannot be swapped, whoever can write the report directory.
std::string run_gnuplot(const std::string& program, std::string_view script, int cwd_fd, int log_fd,
                        const fs::path& log_shown) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw SystemError("creating a pipe for gnuplot's input", errno);
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  SpawnActions spawn;
  posix_spawn_file_actions_addfchdir_np(&spawn.actions, cwd_fd);
  posix_spawn_file_actions_adddup2(&spawn.actions, read_end.get(), STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&spawn.actions, log_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&spawn.actions, log_fd, STDERR_FILENO);
  std::string program_arg = program;
  char* argv[] = {program_arg.data(), nullptr};
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, program.c_str(), &spawn.actions, nullptr, argv, environ);
  if (rc != 0) {
    return fmt::format("cannot run '{}': {} (install gnuplot-nox, see scripts/install-deps.sh)", program,
                       std::strerror(rc));
  }
  read_end.reset();
  {
    // A gnuplot that stops reading early (EPIPE) is judged by its exit status below.
    SigpipeBlocked blocked;
    try {
      write_all(write_end.get(), script, "gnuplot's input");
    } catch (const SystemError& e) {
      if (e.errnum() != EPIPE) spdlog::warn("ep-bench: {}", e.what());
    }
    write_end.reset();
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return fmt::format("waiting for '{}': {}", program, std::strerror(errno));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  const std::string how = WIFEXITED(status) ? fmt::format("exited with status {}", WEXITSTATUS(status))
                                            : fmt::format("was killed by signal {}", WTERMSIG(status));
  return fmt::format("'{}' (bandwidth.gp on its input) {}; its output is in {}", program, how, log_shown.string());
}

// ---- The plot ----------------------------------------------------------------------------------

struct PlotData {
  std::string bandwidth;    ///< bandwidth.dat: one block (index) per rank, "phase gbps" rows
  std::string transitions;  ///< transitions.dat: "phase max_join_ms max_detect_ms"
  std::string rank_words;   ///< the ranks of the blocks, in order, space-separated
  bool any_transition = false;
};

PlotData plot_data(const RunResults& r) {
  PlotData d;
  std::map<int, std::vector<std::pair<int, double>>> per_rank;
  for (const auto& s : r.samples)
    if (s.bandwidth) per_rank[s.rank].emplace_back(s.phase, s.bandwidth->gbps);
  d.bandwidth = "# ep-bench: dispatch + combine bandwidth (logical GB/s); one block per rank: phase gbps\n";
  for (auto& [rank, points] : per_rank) {
    std::sort(points.begin(), points.end());
    d.bandwidth += fmt::format("# rank {}\n", rank);
    for (std::size_t i = 0; i < points.size(); ++i) {
      // A blank line breaks the line: a rank absent from a phase must not look measured there.
      if (i > 0 && points[i].first != points[i - 1].first + 1) d.bandwidth += "\n";
      d.bandwidth += fmt::format("{} {}\n", points[i].first, points[i].second);
    }
    d.bandwidth += "\n\n";
    d.rank_words += fmt::format("{}{}", d.rank_words.empty() ? "" : " ", rank);
  }
  const auto phases = by_phase(r.samples);
  d.transitions = "# phase max_join_ms max_detect_ms ('-' = none)\n";
  for (std::size_t p = 0; p < r.plan.num_phases(); ++p) {
    std::optional<double> join, detect;
    if (auto it = phases.find(static_cast<int>(p)); it != phases.end()) {
      join = phase_max(it->second, [](const PhaseSample& s) { return s.join_ms; });
      detect = phase_max(it->second, [](const PhaseSample& s) { return s.detect_ms; });
    }
    d.any_transition = d.any_transition || join || detect;
    d.transitions += fmt::format("{} {} {}\n", p, gp_value(join), gp_value(detect));
  }
  return d;
}

// bandwidth.gp: its data inline (gnuplot data blocks), so that it reads no file, and its image
// written to 'bandwidth.png' in the directory it runs in (ep-bench's private one).
std::string plot_script(const RunResults& r, const PlotData& d) {
  std::string title = "ep-bench plan " + r.plan.to_json();
  if (title.size() > 100) title = title.substr(0, 97) + "...";
  std::string gp = "# Drawn by ep-bench (gnuplot read this on its input); redraw with: gnuplot bandwidth.gp\n";
  gp += "# The data are inline; bandwidth.dat and transitions.dat hold the same rows.\n";
  gp += "$bandwidth << EOD\n" + d.bandwidth + "EOD\n";
  gp += "$transitions << EOD\n" + d.transitions + "EOD\n";
  gp += "set terminal png size 1100,900\nset output 'bandwidth.png'\n";
  gp += "set datafile missing '-'\n";
  gp += fmt::format("set multiplot layout 2,1 title {}\n", gp_quote(title));
  gp += "set grid\nset xtics 1\n";
  gp += fmt::format("set xrange [-0.5:{}]\n", static_cast<double>(r.plan.num_phases()) - 0.5);
  gp += "set xlabel 'phase'\nset key outside right\n";
  gp += "set title 'Dispatch + combine bandwidth per phase and rank (logical GB/s)'\nset ylabel 'GB/s'\n";
  if (d.rank_words.empty()) {
    gp +=
        "set yrange [0:1]\nset label 1 'no bandwidth measured' at graph 0.5, 0.5 center\nplot -1 notitle\nunset label 1\nset autoscale y\n";
  } else {
    gp += fmt::format("ranks = '{}'\n", d.rank_words);
    gp +=
        "plot for [i=1:words(ranks)] $bandwidth index (i-1) using 1:2 with linespoints title 'rank '.word(ranks, i)\n";
  }
  gp += "set title 'Phase transitions (largest over ranks)'\nset ylabel 'ms'\n";
  if (!d.any_transition) {
    gp += "set yrange [0:1]\nset label 1 'no joins or detected failures' at graph 0.5, 0.5 center\nplot -1 notitle\n";
  } else {
    gp += "set yrange [0:*]\nset style fill solid 0.6\nset boxwidth 0.3\n";
    gp +=
        "plot $transitions using ($1-0.15):2 with boxes title 'join ms', $transitions using ($1+0.15):3 with boxes title 'failure detection ms'\n";
  }
  return gp + "unset multiplot\n";
}

// Writes the plot files into the report directory `dir_fd` and draws bandwidth.png; returns ""
// or why there is no plot. gnuplot reads its script from a pipe and writes into a private
// directory; the image and log reach the report directory as every other file does.
std::string plot_files(int dir_fd, const fs::path& dir, const RunResults& r, const ReportOptions& options,
                       fs::path& png) {
  const PlotData data = plot_data(r);
  write_file_atomically(dir_fd, dir, "bandwidth.dat", data.bandwidth);
  write_file_atomically(dir_fd, dir, "transitions.dat", data.transitions);
  const std::string script = plot_script(r, data);
  write_file_atomically(dir_fd, dir, "bandwidth.gp", script);
  if (::unlinkat(dir_fd, "bandwidth.png", 0) != 0 && errno != ENOENT)  // a stale image must not pass for this run's
    throw SystemError(fmt::format("removing the old {}", (dir / "bandwidth.png").string()), errno);

  const PrivateDirectory work;
  std::string why;
  {
    const UniqueFd log(::openat(work.fd(), "gnuplot.log", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!log) throw SystemError(fmt::format("creating {}", (work.path() / "gnuplot.log").string()), errno);
    why = run_gnuplot(options.gnuplot, script, work.fd(), log.get(), dir / "gnuplot.log");
  }
  const auto log_path = dir / "gnuplot.log";
  write_file_atomically(dir_fd, dir, "gnuplot.log",
                        read_file_at(work.fd(), "gnuplot.log", work.path() / "gnuplot.log").value_or(""));
  if (!why.empty()) return why;
  const auto image = read_file_at(work.fd(), "bandwidth.png", work.path() / "bandwidth.png");
  if (!image || image->empty())
    return fmt::format("gnuplot ran but wrote no {}; see {}", (dir / "bandwidth.png").string(), log_path.string());
  write_file_atomically(dir_fd, dir, "bandwidth.png", *image);
  png = dir / "bandwidth.png";
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

void write_file_atomically(int dir_fd, const std::filesystem::path& dir, std::string_view name,
                           std::string_view content) {
  const fs::path shown = dir / name;
  TemporaryName tmp{dir_fd, {}};
  UniqueFd fd = create_temporary_at(dir_fd, dir, name, tmp.name);
  ::fchmod(fd.get(), 0644);  // the temporary file's 0600 would hide the report from the other users it is for
  write_all(fd.get(), content, shown);
  if (::fsync(fd.get()) != 0) throw SystemError(fmt::format("flushing {}", shown.string()), errno);
  if (::close(fd.release()) != 0) throw SystemError(fmt::format("closing {}", shown.string()), errno);
  const std::string target(name);
  if (::renameat(dir_fd, tmp.name.c_str(), dir_fd, target.c_str()) != 0)
    throw SystemError(fmt::format("renaming {} to {}", (dir / tmp.name).string(), shown.string()), errno);
  tmp.name.clear();  // renamed: nothing left to remove
}

void check_report_dir(const std::filesystem::path& dir) {
  UniqueFd fd;
  try {
    fd = open_report_dir(dir, "--report-dir");
  } catch (const SystemError& e) {
    throw UsageError(e.what());
  }
  // Writable? Ask the file system itself (permissions, a read-only mount, a full disk for
  // the directory entry): create a file and remove it.
  TemporaryName probe{fd.get(), {}};
  try {
    create_temporary_at(fd.get(), dir, "ep-bench-write-check", probe.name);
  } catch (const SystemError& e) {
    throw UsageError(
        fmt::format("--report-dir {}: cannot create files in it: {}", dir.string(), std::strerror(e.errnum())));
  }
}

ReportFiles write_report(const std::filesystem::path& dir, const RunResults& results, const ReportOptions& options) {
  // Checked again, on the descriptor every file below is written through: the directory may
  // have changed since check_report_dir, and a plan-N subdirectory is new.
  const UniqueFd dir_fd = open_report_dir(dir, "report directory");
  ReportFiles files;
  files.plan_json = dir / "plan.json";
  write_file_atomically(dir_fd.get(), dir, "plan.json", results.plan.to_json() + "\n");
  files.results_json = dir / "results.json";
  write_file_atomically(dir_fd.get(), dir, "results.json", results_json(results));

  if (options.plot) {
    try {
      files.plot_warning = plot_files(dir_fd.get(), dir, results, options, files.plot_png);
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
