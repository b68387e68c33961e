#include "coordinator.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "coordinator_link.hpp"
#include "failure_agreement.hpp"
#include "hyrun/common/env_contract.hpp"
#include "hyrun/common/hex.hpp"
#include "hyrun/ep/report/progress_line.hpp"
#include "hyrun/ep/report/run_report.hpp"
#include "hyrun/ep/report/summary_table.hpp"

namespace hyrun::ep::elastic {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

}  // namespace

Coordinator::Coordinator(World& world, const BenchOptions& options, const std::vector<ElasticPlan>& plans,
                         const ElasticSchedule& schedule, PhaseLoop& loop)
    : world_(world),
      options_(options),
      plans_(plans),
      schedule_(schedule),
      loop_(loop),
      ranks_(static_cast<std::size_t>(world.size())),
      requested_(static_cast<std::size_t>(world.size()), 0),
      released_(static_cast<std::size_t>(world.size()), 0),
      admissions_(static_cast<std::size_t>(world.size()), 0) {}

Coordinator::~Coordinator() = default;

int Coordinator::run() {
  ranks_[0] = {world_.incarnation(),
               to_hex(world_.own_address()),
               world_.node_rank(),
               to_hex(loop_.buffer().local_descriptor()),
               true,
               node_name(),
               world_.local_rank(),
               ""};  // rank 0 is never replaced: its peers watch it from the address table
  for (int r = 1; r < world_.size(); ++r) {
    if (!schedule_.used(r) || !schedule_.started_at_launch(r)) {
      ranks_[r].alive = false;
      continue;
    }
    ranks_[r].descriptor = expect<msg::Register>(world_, r).descriptor;
  }
  open_join_server();
  report::ProgressLine progress;
  std::vector<report::PhaseSample> samples;
  std::vector<std::optional<double>> durations;
  const auto& phases = schedule_.phases();
  for (std::size_t gi = 0; gi < phases.size(); ++gi) {
    const GlobalPhase& g = phases[gi];
    progress.update(g.phase, plans_[g.plan].num_phases(), fmt::format("plan {} of {}", g.plan + 1, plans_.size()));
    const auto phase_start = Clock::now();
    for (int r : ranks_where(g.departs)) release(r);
    admit_new_processes(g, gi);
    run_phase(g, gi, phase_start, samples);
    durations.push_back(ms_since(phase_start));
    const bool plan_ends = gi + 1 == phases.size() || phases[gi + 1].plan != g.plan;
    if (plan_ends) {
      progress.clear();
      finish_plan(g.plan, samples, durations);
      samples.clear();
      durations.clear();
    }
  }
  std::vector<int> alive;
  for (int r = 1; r < world_.size(); ++r)
    if (ranks_[r].alive) alive.push_back(r);
  for (int r : alive) send(world_, r, msg::Done{});
  // Regions are freed only when no rank maps them any more (see the members' Done).
  for (int r : alive) expect<msg::Closed>(world_, r);
  loop_.buffer().close_peers();
  for (int r : alive) send(world_, r, msg::Free{});
  if (!invalid_.empty())
    throw Error(fmt::format("--validate: {} check(s) failed; first: {}", invalid_.size(), invalid_.front()));
  return 0;
}

/// Staged launches: rank 0 serves joins of later launches (--join-port).
void Coordinator::open_join_server() {
  const auto& staged = options_.staged;
  if (!staged.staged() || staged.join_port < 0) return;
  pool_.emplace(staged.launch_ranks, world_.size(), node_name());
  join::Grant grant;
  grant.world_size = world_.size();
  grant.launch_ranks = staged.launch_ranks;
  grant.root_address = to_hex(world_.own_address());
  const char* token = std::getenv(env::kJobToken);
  join_server_ = std::make_unique<JoinServer>(staged.join_port, token ? token : "", grant, node_name(), *pool_);
  spdlog::info("rank 0: join server listening on TCP port {}", join_server_->port());
}

/// True when rank 0's launch starts `rank`'s next process (on request) rather than a later launch.
bool Coordinator::starts_locally(int rank) const {
  const auto& staged = options_.staged;
  return staged.staged() && rank < staged.launch_ranks && (!ever_started(rank) || staged.restart_returning);
}

bool Coordinator::ever_started(int rank) const { return schedule_.started_at_launch(rank) || requested_[rank]; }

/// A rank that left or was killed: a later launch may take it (the reference's rank server).
void Coordinator::release(int rank) {
  if (!pool_ || released_[rank] || starts_locally(rank)) return;
  released_[rank] = 1;
  pool_->release(rank);
}

void Coordinator::admit_new_processes(const GlobalPhase& g, std::size_t gi) {
  std::vector<int> waiting = ranks_where(g.new_process);
  for (int r : waiting) {
    released_[r] = 0;  // back in the job
    if (!starts_locally(r)) continue;
    request_rank_start(r);  // hyrun starts its process now: the join time includes the start
    requested_[r] = 1;
  }
  const auto limit =
      options_.staged.staged() ? std::chrono::milliseconds(options_.parameters.timeout_ms) : world_.timeout();
  const auto deadline = Clock::now() + limit;
  while (!waiting.empty()) {
    // A launch may start a rank before its phase: its join is kept until then.
    for (auto& rejoin : world_.accept_rejoins()) {
      if (pool_) pool_->joined(rejoin.rank);  // its launch's end no longer gives the rank back
      early_[rejoin.rank] = std::move(rejoin);
    }
    for (auto it = waiting.begin(); it != waiting.end();) {
      const auto found = early_.find(*it);
      if (found == early_.end()) {
        ++it;
        continue;
      }
      const msg::Register reg = expect<msg::Register>(world_, *it);
      auto& m = ranks_[*it];
      m.incarnation = ++admissions_[*it];  // peers attach a process once per admission
      m.address = to_hex(found->second.address);
      m.world_node = found->second.node;
      m.process = to_hex(found->second.process);
      m.descriptor = reg.descriptor;
      m.alive = true;
      early_.erase(found);
      it = waiting.erase(it);
    }
    if (waiting.empty()) break;
    if (Clock::now() > deadline) {
      const GlobalPhase& phase = schedule_.phases()[gi];
      std::string how;
      if (options_.staged.staged()) {
        std::vector<int> ours, theirs;
        for (int r : waiting) (r < options_.staged.launch_ranks && requested_[r] ? ours : theirs).push_back(r);
        if (!ours.empty())
          how += fmt::format("; rank 0's launch started [{}] (see its log for why they did not join)",
                             fmt::join(ours, ", "));
        if (!theirs.empty())
          how += fmt::format(
              "; [{}] must come from a later launch: ep-elastic --tcp-server {} --port {} --num-processes {}",
              fmt::join(theirs, ", "), node_name(), options_.staged.join_port, theirs.size());
      }
      throw TimeoutError(fmt::format("rank 0: rank(s) {} that phase {} of plan {} needs did not join within {} ms{}",
                                     fmt::join(waiting, ", "), phase.phase, phase.plan + 1, limit.count(), how));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void Coordinator::run_phase(const GlobalPhase& g, std::size_t gi, Clock::time_point phase_start,
                            std::vector<report::PhaseSample>& samples) {
  const int phase = static_cast<int>(g.phase);
  msg::Phase announcement{gi, {}};
  for (int r : ranks_where(g.active))
    announcement.peers.push_back(
        {r, ranks_[r].incarnation, ranks_[r].address, ranks_[r].world_node, ranks_[r].descriptor, ranks_[r].process});
  std::vector<int> leaving;  // told to leave: they wait for Free
  for (int r = 1; r < world_.size(); ++r) {
    if (!(g.active[r] || g.departs[r]) || !ranks_[r].alive) continue;
    send(world_, r, announcement);
    if (g.departs[r]) {
      ranks_[r].alive = false;
      leaving.push_back(r);
    }
  }
  loop_.enter(g, gi, announcement.peers);
  std::vector<std::optional<double>> join_ms(static_cast<std::size_t>(world_.size()));
  for (int r : ranks_where(g.active)) {
    if (r == 0) continue;
    expect<msg::Ready>(world_, r);
    join_ms[r] = ms_since(phase_start);  // a new process's start and admission included
  }
  // Every staying rank detached the departing ones before its Ready: they may go.
  for (int r : leaving) send(world_, r, msg::Free{});
  for (int r : ranks_where(g.active))
    if (r != 0) send(world_, r, msg::Go{});

  FailureAgreement agreement(g.active, gi);
  const auto outcome = loop_.run(g, gi, false, [&](const std::vector<int>& seen, double, int iteration) {
    agreement.begin_round(seen, iteration);
    while (const auto r = agreement.next_reporter([this](int rank) { return world_.peer_failed(rank); }))
      agreement.add_report(*r, expect<msg::Failed>(world_, *r));
    auto decision = agreement.decide();
    // Before any survivor can print this phase's end (a later launch waits for it).
    for (int r : decision.resume.ranks) release(r);
    for (int r : decision.survivors) send(world_, r, decision.resume);
    return decision.resume;
  });
  loop_.report(g, outcome);

  const auto& failed = agreement.failed();
  for (int r : ranks_where(failed)) ranks_[r].alive = false;
  for (int r : ranks_where(g.killed)) {
    ranks_[r].alive = false;
    release(r);
  }
  gather_samples(g, outcome, join_ms, failed, samples);
  if (options_.parameters.validate_phase_failures) {
    const auto expected = ranks_where(g.killed);
    const auto detected = ranks_where(failed);
    if (expected != detected)
      throw Error(
          fmt::format("phase {} of plan {}: detected failed ranks [{}], the plan killed [{}] "
                      "(--validate-phase-failures)",
                      phase, g.plan, fmt::join(detected, ", "), fmt::join(expected, ", ")));
  }
}

/// Every rank's sample of phase `g`: rank 0's own, each survivor's msg::Result, and the
/// role alone for ranks that were killed, left or failed.
void Coordinator::gather_samples(const GlobalPhase& g, const PhaseOutcome& outcome,
                                 const std::vector<std::optional<double>>& join_ms, const std::vector<char>& failed,
                                 std::vector<report::PhaseSample>& samples) {
  const int phase = static_cast<int>(g.phase);
  const ElasticPlan& plan = plans_[g.plan];
  for (int r = 0; r < world_.size(); ++r) {
    const PhaseRole role = plan.role(g.phase, r);
    if (role == PhaseRole::kIdle) continue;
    report::PhaseSample s;
    s.phase = phase;
    s.rank = r;
    s.state = role;
    s.join_ms = role == PhaseRole::kJoined ? join_ms[r] : std::nullopt;
    s.node = ranks_[r].node;  // as last reported (left and killed ranks report nothing now)
    s.local_rank = ranks_[r].local_rank;
    if (r == 0) {
      if (outcome.validation_problem)
        invalid_.push_back(fmt::format("rank 0 in phase {}: {}", phase, *outcome.validation_problem));
      s.node = node_name();
      s.local_rank = world_.local_rank();
      s.bandwidth = outcome.bandwidth;
      s.split = outcome.split;
      s.detected_ranks = outcome.detected;
      s.detect_ms = outcome.detect_ms;
    } else if (role == PhaseRole::kActive || role == PhaseRole::kJoined) {
      if (failed[r]) continue;
      const msg::Result result = expect<msg::Result>(world_, r);
      s.node = ranks_[r].node = result.node;
      s.local_rank = ranks_[r].local_rank = result.local_rank;
      s.bandwidth = result.bandwidth;
      s.split = result.split;
      s.detected_ranks = result.detected;
      s.detect_ms = result.detect_ms;
      if (result.validation_problem)
        invalid_.push_back(fmt::format("rank {} in phase {}: {}", r, phase, *result.validation_problem));
    }
    samples.push_back(std::move(s));
  }
}

void Coordinator::finish_plan(std::size_t plan_index, const std::vector<report::PhaseSample>& samples,
                              const std::vector<std::optional<double>>& durations) {
  const ElasticPlan& plan = plans_[plan_index];
  std::fputs(report::format_summary(samples, plan.num_phases(), report::SummaryOptions::for_stream(stdout)).c_str(),
             stdout);
  std::fflush(stdout);
  if (options_.report_dir.empty()) return;
  report::RunResults results{options_.parameters, plan, samples, durations};
  const std::string dir =
      plans_.size() == 1 ? options_.report_dir : fmt::format("{}/plan-{}", options_.report_dir, plan_index + 1);
  const auto files = report::write_report(dir, results);
  if (!files.plot_warning.empty()) std::fprintf(stderr, "ep-bench: %s\n", files.plot_warning.c_str());
}

}  // namespace hyrun::ep::elastic
