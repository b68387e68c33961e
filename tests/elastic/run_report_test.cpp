// results.json, plan.json and the gnuplot plot written into a temporary directory and read back.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "hyrun/common/error.hpp"
#include "hyrun/ep/report/run_report.hpp"
#include "phase_samples.hpp"

namespace hyrun::ep::report {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool have_gnuplot() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

const std::string kPngMagic("\x89PNG\r\n\x1a\n", 8);

// A program for ReportOptions::gnuplot: a shell script `body`, in a directory of the test's own.
fs::path write_program(const fs::path& dir, const std::string& body) {
  fs::create_directories(dir);
  const fs::path path = dir / "fake-gnuplot";
  { std::ofstream(path) << "#!/bin/sh\n" << body; }
  fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                            fs::perms::others_exec);
  return path;
}

// The message of the UsageError that check_report_dir throws for `dir`, or "" when it accepts it.
std::string check_report_dir_error(const fs::path& dir) {
  try {
    check_report_dir(dir);
    return "";
  } catch (const UsageError& e) {
    return e.what();
  }
}

class RunReport : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("hyrun-report-test-{}-{}", ::getpid(),
                                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override {
    fs::remove_all(dir_);
    fs::remove_all(helper_dir());
  }

  // Files of the test itself (fake programs, what they record, the victim): outside dir_.
  fs::path helper_dir() const { return fs::path(dir_.string() + "-helper"); }

  static RunResults run() {
    RunResults r{.parameters = {},
                 .plan = ElasticPlan::parse("[[0,1],[0,1,2,3],[0,1,-2,3],[0,3]]", 6, "test plan"),
                 .samples = {},
                 .phase_duration_ms = {1200.5, 900}};
    r.parameters.world_size = 6;
    r.parameters.seed = 42;
    auto add = [&](int phase, int rank, PhaseRole state, std::optional<double> gbps, std::optional<double> join = {},
                   std::optional<double> detect = {}) {
      PhaseSample s =
          test_support::hand_made_sample(phase, rank, state, gbps, join, detect, BandwidthStats{0, 50, 40, 60});
      if (gbps) s.split = SplitBandwidth{*gbps / 2, 20, *gbps * 2, 30};
      r.samples.push_back(s);
    };
    add(0, 1, PhaseRole::kJoined, 12, 6.5);
    add(0, 0, PhaseRole::kJoined, 10, 5.0);
    add(1, 0, PhaseRole::kActive, 20);
    add(1, 2, PhaseRole::kJoined, 18, 40.0);
    add(2, 0, PhaseRole::kActive, 8, {}, 30.5);
    add(2, 2, PhaseRole::kKilled, {});
    add(2, 3, PhaseRole::kActive, 7, {}, 35.0);
    add(3, 0, PhaseRole::kActive, 30);
    return r;
  }

  fs::path dir_;
};

TEST_F(RunReport, ResultsJsonHasParametersPlanPhasesAndSamples) {
  const auto files = write_report(dir_, run(), {.plot = false});
  EXPECT_EQ(files.results_json, dir_ / "results.json");
  EXPECT_EQ(read(dir_ / "plan.json"), "[[0,1],[0,1,2,3],[0,1,-2,3],[0,3]]\n");

  const auto doc = nlohmann::json::parse(read(files.results_json));
  EXPECT_EQ(doc["schema"], "hyrun-ep-bench-results/1");
  EXPECT_EQ(doc["parameters"]["num_tokens"], 128);
  EXPECT_EQ(doc["parameters"]["hidden_dim"], 7168);
  EXPECT_EQ(doc["parameters"]["num_topk"], 8);
  EXPECT_EQ(doc["parameters"]["num_experts_per_rank"], 2);
  EXPECT_EQ(doc["parameters"]["num_experts"], 8);
  EXPECT_EQ(doc["parameters"]["timeout_ms"], 30000);
  EXPECT_EQ(doc["parameters"]["seed"], 42);
  EXPECT_EQ(doc["parameters"]["dispatch_dtype"], "fp8");
  EXPECT_EQ(doc["plan"], nlohmann::json::parse("[[0,1],[0,1,2,3],[0,1,-2,3],[0,3]]"));
  EXPECT_EQ(doc["plan_source"], "test plan");
  EXPECT_EQ(doc["unused_ranks"], nlohmann::json::parse("[4,5]"));
  EXPECT_EQ(doc["bandwidth_kind"], "logical");
  EXPECT_DOUBLE_EQ(doc["overall_mean_gbps"].get<double>(), (12 + 10 + 20 + 18 + 8 + 7 + 30) / 7.0);

  const auto& phases = doc["phases"];
  ASSERT_EQ(phases.size(), 4u);
  EXPECT_EQ(phases[2]["entries"], nlohmann::json::parse("[0,1,-2,3]"));
  EXPECT_EQ(phases[2]["killed"], nlohmann::json::parse("[2]"));
  EXPECT_EQ(phases[2]["survivors"], nlohmann::json::parse("[0,1,3]"));
  EXPECT_EQ(phases[1]["joining"], nlohmann::json::parse("[2,3]"));
  EXPECT_EQ(phases[3]["leaving"], nlohmann::json::parse("[1]"));
  EXPECT_EQ(phases[3]["new_processes"], nlohmann::json::array());
  EXPECT_DOUBLE_EQ(phases[0]["duration_ms"].get<double>(), 1200.5);
  EXPECT_TRUE(phases[2]["duration_ms"].is_null());
  EXPECT_DOUBLE_EQ(phases[0]["max_join_ms"].get<double>(), 6.5);
  EXPECT_DOUBLE_EQ(phases[2]["max_detect_ms"].get<double>(), 35.0);
  EXPECT_TRUE(phases[3]["max_join_ms"].is_null());
  EXPECT_DOUBLE_EQ(phases[1]["mean_gbps"].get<double>(), 19.0);

  // Samples sorted by rank within a phase; every field present, null when not measured.
  const auto& p0 = phases[0]["samples"];
  ASSERT_EQ(p0.size(), 2u);
  EXPECT_EQ(p0[0]["rank"], 0);
  EXPECT_EQ(p0[1]["rank"], 1);
  EXPECT_EQ(p0[1]["node"], "node-a");
  EXPECT_EQ(p0[1]["local_rank"], 1);
  EXPECT_EQ(p0[1]["state"], "joined");
  EXPECT_DOUBLE_EQ(p0[1]["gbps"].get<double>(), 12);
  EXPECT_DOUBLE_EQ(p0[1]["avg_us"].get<double>(), 50);
  EXPECT_DOUBLE_EQ(p0[1]["min_us"].get<double>(), 40);
  EXPECT_DOUBLE_EQ(p0[1]["max_us"].get<double>(), 60);
  EXPECT_DOUBLE_EQ(p0[1]["dispatch_gbps"].get<double>(), 6);
  EXPECT_DOUBLE_EQ(p0[1]["combine_gbps"].get<double>(), 24);
  EXPECT_DOUBLE_EQ(p0[1]["join_ms"].get<double>(), 6.5);
  EXPECT_TRUE(p0[1]["detect_ms"].is_null());
  const auto& killed = phases[2]["samples"][1];
  EXPECT_EQ(killed["rank"], 2);
  EXPECT_EQ(killed["state"], "killed");
  EXPECT_TRUE(killed["gbps"].is_null());
  EXPECT_EQ(phases[2]["samples"][0]["detected_ranks"], nlohmann::json::parse("[2]"));

  // No temporary files left behind by the atomic writes.
  for (const auto& entry : fs::directory_iterator(dir_))
    EXPECT_NE(entry.path().filename().string()[0], '.') << entry.path();
  EXPECT_FALSE(fs::exists(dir_ / "bandwidth.png"));
}

TEST_F(RunReport, DrawsThePlotWithGnuplot) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed (scripts/install-deps.sh installs gnuplot-nox)";
  const auto files = write_report(dir_, run());
  EXPECT_EQ(files.plot_warning, "");
  ASSERT_EQ(files.plot_png, dir_ / "bandwidth.png");
  const std::string png = read(files.plot_png);
  ASSERT_GE(png.size(), 8u);
  EXPECT_EQ(png.substr(0, 8), kPngMagic);
  EXPECT_TRUE(fs::exists(dir_ / "bandwidth.gp"));
  EXPECT_TRUE(fs::exists(dir_ / "bandwidth.dat"));
  EXPECT_TRUE(fs::exists(dir_ / "transitions.dat"));
}

TEST_F(RunReport, PlotsARunWithoutMeasurements) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  RunResults r{.parameters = {}, .plan = ElasticPlan::parse("[[0]]", 1), .samples = {}, .phase_duration_ms = {}};
  const auto files = write_report(dir_, r);
  EXPECT_EQ(files.plot_warning, "");
  EXPECT_TRUE(nlohmann::json::parse(read(files.results_json))["overall_mean_gbps"].is_null());
}

TEST_F(RunReport, MissingGnuplotIsAWarningAndTheJsonIsStillWritten) {
  const auto files = write_report(dir_, run(), {.plot = true, .gnuplot = "hyrun-no-such-gnuplot"});
  EXPECT_NE(files.plot_warning.find("cannot run 'hyrun-no-such-gnuplot'"), std::string::npos) << files.plot_warning;
  EXPECT_TRUE(files.plot_png.empty());
  EXPECT_EQ(nlohmann::json::parse(read(files.results_json))["phases"].size(), 4u);
}

TEST_F(RunReport, FailingGnuplotIsAWarning) {
  const auto files = write_report(dir_, run(), {.plot = true, .gnuplot = "false"});
  EXPECT_NE(files.plot_warning.find("exited with status 1"), std::string::npos) << files.plot_warning;
  EXPECT_TRUE(fs::exists(files.results_json));
}

TEST_F(RunReport, PlotBreaksARanksLineWhereItDidNotRun) {
  RunResults r{
      .parameters = {}, .plan = ElasticPlan::parse("[[0,1],[0],[0,1]]", 2), .samples = {}, .phase_duration_ms = {}};
  for (int phase : {0, 2}) {
    PhaseSample s;
    s.phase = phase;
    s.rank = 1;
    s.state = PhaseRole::kJoined;
    s.bandwidth = BandwidthStats{10.0 + phase, 1, 1, 1};
    r.samples.push_back(s);
  }
  write_report(dir_, r, {.plot = true, .gnuplot = "true"});  // data files only; no drawing needed
  EXPECT_NE(read(dir_ / "bandwidth.dat").find("# rank 1\n0 10\n\n2 12\n"), std::string::npos)
      << read(dir_ / "bandwidth.dat");
  EXPECT_NE(read(dir_ / "transitions.dat").find("0 - -\n1 - -\n2 - -\n"), std::string::npos)
      << read(dir_ / "transitions.dat");
}

TEST_F(RunReport, RelativeReportDirectory) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  fs::create_directories(dir_);
  const auto cwd = fs::current_path();
  fs::current_path(dir_);
  const auto files = write_report("out/report", run());
  fs::current_path(cwd);
  EXPECT_EQ(files.plot_warning, "");
  EXPECT_TRUE(fs::exists(dir_ / "out/report/bandwidth.png"));
  EXPECT_TRUE(fs::exists(dir_ / "out/report/results.json"));
}

TEST_F(RunReport, UnwritableDirectoryNamesIt) {
  try {
    write_report("/proc/hyrun-no-such-dir/report", run(), {.plot = false});
    FAIL();
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find("/proc/hyrun-no-such-dir/report"), std::string::npos) << e.what();
  }
}

TEST_F(RunReport, PlantedSymlinksAreNotFollowed) {
  // Another user of a shared report directory plants links at every name the report uses,
  // temporary names included: each must be replaced, and the target left untouched.
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  fs::create_directories(dir_);
  const fs::path victim = dir_ / "victim";
  { std::ofstream(victim) << "precious\n"; }
  const auto pid = ::getpid();
  for (const std::string name : {"results.json", "plan.json", "bandwidth.dat", "transitions.dat", "bandwidth.gp",
                                 "bandwidth.png", "gnuplot.log"}) {
    fs::create_symlink(victim, dir_ / name);
    fs::create_symlink(victim, dir_ / fmt::format(".{}.tmp.{}", name, pid));
  }
  const auto files = write_report(dir_, run());
  EXPECT_EQ(read(victim), "precious\n");
  for (const std::string name : {"results.json", "plan.json", "bandwidth.dat", "bandwidth.gp", "bandwidth.png"})
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(dir_ / name))) << name << " is still a link";
  EXPECT_EQ(files.plot_warning, "");
  for (const auto& entry : fs::directory_iterator(dir_)) {  // temporary files of ours are gone
    if (entry.path().filename().string().find(".tmp.") == std::string::npos) {
      EXPECT_NE(entry.path().filename().string()[0], '.') << entry.path();
    }
  }
}

// Another user who can write the report directory wins the race against gnuplot: the moment
// gnuplot starts, every script in the directory is one that runs a command. gnuplot must run
// ep-bench's own script (fed on its stdin), not whatever a name in the directory holds then.
TEST_F(RunReport, AScriptSwappedInWhileGnuplotStartsIsNotRun) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  fs::create_directories(dir_);
  const fs::path pwned = helper_dir() / "pwned";
  const auto attacker = write_program(helper_dir(), fmt::format(R"(for f in '{0}'/.* '{0}'/*; do
  case "$f" in *.gp*) printf "system 'touch {1}'\n" > "$f.new"; mv -f "$f.new" "$f" ;; esac
done
exec gnuplot "$@"
)",
                                                                dir_.string(), pwned.string()));
  const auto files = write_report(dir_, run(), {.plot = true, .gnuplot = attacker.string()});
  EXPECT_FALSE(fs::exists(pwned)) << "gnuplot ran a script planted in the report directory";
  EXPECT_EQ(files.plot_warning, "");
  ASSERT_EQ(files.plot_png, dir_ / "bandwidth.png");
  EXPECT_EQ(read(files.plot_png).substr(0, 8), kPngMagic);
}

// The same race against the image: while gnuplot runs, every PNG-looking file in the report
// directory becomes a link to a file of the victim outside it. Nothing may write through it.
TEST_F(RunReport, AnImageSwappedForALinkIsNotWrittenThrough) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  fs::create_directories(dir_);
  fs::create_directories(helper_dir());
  const fs::path victim = helper_dir() / "victim";
  { std::ofstream(victim) << "precious\n"; }
  const auto attacker = write_program(helper_dir(), fmt::format(R"(for f in '{0}'/.* '{0}'/*; do
  case "$f" in *png*|*.log*) ln -sfn '{1}' "$f" ;; esac
done
exec gnuplot "$@"
)",
                                                                dir_.string(), victim.string()));
  const auto files = write_report(dir_, run(), {.plot = true, .gnuplot = attacker.string()});
  const std::string victim_now = read(victim);
  EXPECT_TRUE(victim_now == "precious\n") << "the file outside was overwritten: " << victim_now.size() << " bytes";
  EXPECT_EQ(files.plot_warning, "");
  ASSERT_EQ(files.plot_png, dir_ / "bandwidth.png");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(files.plot_png))) << "bandwidth.png is a link";
  EXPECT_EQ(read(files.plot_png).substr(0, 8), kPngMagic);
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(dir_ / "gnuplot.log")));
}

// gnuplot is given no name another user could swap: no argument, the script on stdin with its
// data inline, and a working directory that is not the report directory.
TEST_F(RunReport, GnuplotReadsItsScriptOnStdinAndNoPathInTheReportDirectory) {
  const fs::path seen = helper_dir() / "seen";
  fs::create_directories(seen);
  const auto recorder =
      write_program(helper_dir(), fmt::format(R"(for a in "$@"; do printf '%s\n' "$a"; done > '{0}/argv'
pwd -P > '{0}/cwd'
cat > '{0}/stdin'
)",
                                              seen.string()));
  const auto files = write_report(dir_, run(), {.plot = true, .gnuplot = recorder.string()});
  EXPECT_EQ(read(seen / "argv"), "") << "gnuplot was given arguments";
  EXPECT_NE(read(seen / "cwd"), fs::canonical(dir_).string() + "\n");
  const std::string script = read(seen / "stdin");
  EXPECT_NE(script.find("set terminal png"), std::string::npos) << script;
  EXPECT_NE(
      script.find(
          "$bandwidth << EOD\n# ep-bench: dispatch + combine bandwidth (logical GB/s); one block per rank: phase gbps\n# rank 0\n0 10\n1 20\n"),
      std::string::npos)
      << script;
  EXPECT_NE(script.find("$transitions << EOD\n"), std::string::npos) << script;
  EXPECT_EQ(script.find(dir_.string()), std::string::npos) << script;
  EXPECT_EQ(script.find("'bandwidth.dat'"), std::string::npos) << "the script reads a file by name";
  EXPECT_EQ(read(dir_ / "bandwidth.gp"), script) << "the kept bandwidth.gp is not the script gnuplot ran";
  EXPECT_NE(files.plot_warning.find("wrote no"), std::string::npos) << files.plot_warning;  // it drew nothing
  EXPECT_FALSE(fs::exists(dir_ / "bandwidth.png"));
}

// docs/security.md: gnuplot "runs in a new directory of ep-bench's own (mkdtemp, mode 0700,
// under $TMPDIR)": nobody else can enter it to swap the image or the log, and it is gone after.
TEST_F(RunReport, GnuplotRunsInAPrivateDirectoryUnderTmpdirRemovedAfter) {
  const fs::path seen = helper_dir() / "seen";
  const fs::path tmp = helper_dir() / "tmp";
  fs::create_directories(seen);
  fs::create_directories(tmp);
  const auto recorder = write_program(helper_dir(), fmt::format(R"(pwd -P > '{0}/cwd'
stat -c '%a %u' . > '{0}/mode'
cat > /dev/null
)",
                                                                seen.string()));
  const char* old_tmpdir = std::getenv("TMPDIR");
  const std::string saved = old_tmpdir ? old_tmpdir : "";
  ::setenv("TMPDIR", tmp.c_str(), 1);
  write_report(dir_, run(), {.plot = true, .gnuplot = recorder.string()});
  old_tmpdir ? ::setenv("TMPDIR", saved.c_str(), 1) : ::unsetenv("TMPDIR");
  std::string cwd = read(seen / "cwd");
  ASSERT_FALSE(cwd.empty()) << "the fake gnuplot did not run";
  cwd.pop_back();
  EXPECT_EQ(fs::path(cwd).parent_path(), fs::canonical(tmp)) << cwd << " is not a new directory under $TMPDIR";
  EXPECT_EQ(read(seen / "mode"), fmt::format("700 {}\n", ::geteuid()));
  EXPECT_FALSE(fs::exists(cwd)) << "gnuplot's directory was left behind";
  EXPECT_TRUE(fs::is_empty(tmp));
}

// docs/security.md: "every file is then written through that same descriptor, so the
// directory checked is the directory written". While gnuplot runs, DIR is moved away and a
// link to another directory put in its place: the image and the log still reach the directory
// that was checked, nothing reaches the other.
TEST_F(RunReport, FilesGoToTheDirectoryCheckedEvenIfItsNameIsSwapped) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  fs::create_directories(dir_);
  fs::create_directories(helper_dir() / "other");
  const fs::path moved = helper_dir() / "moved";
  const auto swapper =
      write_program(helper_dir(), fmt::format(R"(mv '{0}' '{1}' && ln -s '{2}' '{0}'
exec gnuplot "$@"
)",
                                              dir_.string(), moved.string(), (helper_dir() / "other").string()));
  const auto files = write_report(dir_, run(), {.plot = true, .gnuplot = swapper.string()});
  EXPECT_EQ(files.plot_warning, "");
  ASSERT_TRUE(fs::is_symlink(fs::symlink_status(dir_))) << "the fake gnuplot did not swap the directory";
  EXPECT_TRUE(fs::is_empty(helper_dir() / "other")) << "a file was written into the directory swapped in";
  for (const std::string name : {"results.json", "bandwidth.gp", "bandwidth.png", "gnuplot.log"})
    EXPECT_TRUE(fs::is_regular_file(moved / name)) << name << " is not in the directory that was checked";
  EXPECT_EQ(read(moved / "bandwidth.png").substr(0, 8), kPngMagic);
  fs::remove(dir_);
}

TEST_F(RunReport, TheKeptScriptRedrawsThePlotByHand) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  const auto files = write_report(dir_, run());
  ASSERT_EQ(files.plot_warning, "");
  const std::string drawn = read(files.plot_png);
  fs::remove(files.plot_png);
  ASSERT_EQ(std::system(fmt::format("cd '{}' && gnuplot bandwidth.gp", dir_.string()).c_str()), 0);
  const std::string redrawn = read(dir_ / "bandwidth.png");
  ASSERT_GE(redrawn.size(), 8u);
  EXPECT_EQ(redrawn.substr(0, 8), kPngMagic);
  EXPECT_EQ(redrawn.size(), drawn.size());
}

TEST_F(RunReport, ADirectoryOthersCanWriteIsRefusedAndNothingIsWrittenThere) {
  fs::create_directories(dir_);
  ::chmod(dir_.c_str(), 0777);
  try {
    write_report(dir_, run());
    FAIL() << "a directory everyone can write was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir_.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("chmod go-w"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST(CheckReportDir, RefusesADirectoryItsGroupOrOthersCanWriteUnlessSticky) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("hyrun-check-report-mode-{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const mode_t mode : {0777, 0775, 0757, 0770, 0702}) {
    ASSERT_EQ(::chmod(dir.c_str(), mode), 0);
    const std::string error = check_report_dir_error(dir);
    EXPECT_NE(error.find("--report-dir " + dir.string()), std::string::npos) << std::oct << mode << ": " << error;
    EXPECT_NE(error.find("can write in it"), std::string::npos) << error;
    EXPECT_NE(error.find("chmod go-w " + dir.string()), std::string::npos) << error;
  }
  for (const mode_t mode : {0755, 0700, 01777, 01770}) {
    ASSERT_EQ(::chmod(dir.c_str(), mode), 0);
    EXPECT_EQ(check_report_dir_error(dir), "") << std::oct << mode;
  }
  fs::remove_all(dir);
}

TEST(CheckReportDir, RefusesADirectoryOfAnotherUser) {
  fs::path dir = "/";  // not a directory of an unprivileged user's
  const fs::path made = fs::temp_directory_path() / fmt::format("hyrun-check-report-owner-{}", ::getpid());
  if (::geteuid() == 0) {
    // root plays another user's directory: one owned by nobody (65534), even sticky.
    fs::remove_all(made);
    fs::create_directories(made);
    ASSERT_EQ(::chown(made.c_str(), 65534, 65534), 0);
    ASSERT_EQ(::chmod(made.c_str(), 01755), 0);
    dir = made;
  }
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  const std::string error = check_report_dir_error(dir);
  EXPECT_NE(error.find("--report-dir " + dir.string()), std::string::npos) << error;
  EXPECT_NE(error.find(fmt::format("owned by uid {}", st.st_uid)), std::string::npos) << error;
  EXPECT_NE(error.find("a directory you own"), std::string::npos) << error;
  if (::geteuid() == 0) {
    EXPECT_THROW(write_report(made, RunResults{.parameters = {},
                                               .plan = ElasticPlan::parse("[[0]]", 1),
                                               .samples = {},
                                               .phase_duration_ms = {}}),
                 Error);
    EXPECT_TRUE(fs::is_empty(made));
  }
  fs::remove_all(made);
}

TEST(CheckReportDir, ALinkToADirectoryIsFollowedOnlyWhenItIsYours) {
  const fs::path base = fs::temp_directory_path() / fmt::format("hyrun-check-report-link-{}", ::getpid());
  fs::remove_all(base);
  fs::create_directories(base / "real");
  fs::create_directory_symlink(base / "real", base / "link");
  EXPECT_EQ(check_report_dir_error(base / "link"), "");
  write_report(
      base / "link",
      RunResults{.parameters = {}, .plan = ElasticPlan::parse("[[0]]", 1), .samples = {}, .phase_duration_ms = {}},
      {.plot = false});
  EXPECT_TRUE(fs::is_regular_file(base / "real" / "results.json"));
  if (::geteuid() == 0) {  // a link another user planted where the report directory was to be
    ASSERT_EQ(::lchown((base / "link").c_str(), 65534, 65534), 0);
    const std::string error = check_report_dir_error(base / "link");
    EXPECT_NE(error.find("--report-dir " + (base / "link").string()), std::string::npos) << error;
    EXPECT_NE(error.find("symbolic link owned by uid 65534"), std::string::npos) << error;
  }
  fs::remove_all(base);
}

TEST(CheckReportDir, CreatesAMissingDirectory) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("hyrun-check-report-dir-{}", ::getpid()) / "a" / "b";
  fs::remove_all(dir.parent_path().parent_path());
  check_report_dir(dir);
  EXPECT_TRUE(fs::is_directory(dir));
  EXPECT_TRUE(fs::is_empty(dir));  // the write probe leaves nothing behind
  fs::remove_all(dir.parent_path().parent_path());
}

// docs/security.md: "A missing DIR is created (mode 0755, less what the umask takes)": never
// writable by others, whatever the umask lets through.
TEST(CheckReportDir, AMissingDirectoryIsCreated0755LessTheUmask) {
  const fs::path base = fs::temp_directory_path() / fmt::format("hyrun-check-report-umask-{}", ::getpid());
  fs::remove_all(base);
  fs::create_directories(base);
  for (const mode_t mask : {0000, 0022, 0077}) {
    const fs::path dir = base / fmt::format("m{:o}", mask);
    const mode_t old = ::umask(mask);
    check_report_dir(dir);
    ::umask(old);
    struct stat st {};
    ASSERT_EQ(::stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0755 & ~mask) << "umask " << std::oct << mask;
  }
  fs::remove_all(base);
}

TEST(CheckReportDir, AFileOrAnUncreatablePathIsAUsageErrorNamingIt) {
  const fs::path file = fs::temp_directory_path() / fmt::format("hyrun-check-report-file-{}", ::getpid());
  { std::ofstream(file) << "x"; }
  for (const fs::path& bad : {file, file / "sub", fs::path("/proc/hyrun-no-such-dir/report")}) {
    try {
      check_report_dir(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(bad.string()), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("--report-dir"), std::string::npos) << e.what();
    }
  }
  fs::remove(file);
}

}  // namespace
}  // namespace hyrun::ep::report
