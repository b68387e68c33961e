#include "phase_loop.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "failure_agreement.hpp"
#include "hyrun/common/hex.hpp"
#include "hyrun/ep/layout.hpp"
#include "hyrun/ep/reference_checks.hpp"
#include "hyrun/ep/reference_inputs.hpp"
#include "hyrun/ep/report/sample_stats.hpp"

namespace hyrun::ep::elastic {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

}  // namespace

std::string node_name() {
  if (const char* n = std::getenv("SLURMD_NODENAME")) return n;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

void emit(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

PhaseLoop::PhaseLoop(World& world, const BenchOptions& options, const std::vector<ElasticPlan>& plans,
                     const ElasticSchedule& schedule)
    : world_(world),
      options_(options),
      plans_(plans),
      schedule_(schedule),
      me_(world.rank()),
      attached_(static_cast<std::size_t>(world.size()), -1) {
  const auto& p = options_.parameters;
  format_ = p.dispatch_dtype == "bf16" ? Format::kBF16 : Format::kFP8;
  shape_ = Shape{world.size(), p.num_tokens, p.hidden_dim, p.num_topk, p.num_experts_per_rank};
  buffer_ = std::make_unique<Buffer>(
      world_, BufferOptions{shape_, options_.backend, std::chrono::milliseconds(p.timeout_ms), PeerAttach::kDeferred});
  calls_ = std::make_unique<EpCalls>(*buffer_, shape_, format_);
}

PhaseLoop::~PhaseLoop() = default;

bool PhaseLoop::respawned_after(std::size_t gi) const {
  return !options_.staged.staged() && schedule_.used_after(gi, me_);
}

void PhaseLoop::enter(const GlobalPhase& g, std::size_t gi, const std::vector<msg::Peer>& peers) {
  for (const auto& p : peers) {
    if (p.rank >= world_.size())
      throw Error(fmt::format("rank {}: phase {} names peer rank {}, outside the world of {} ranks", me_, gi, p.rank,
                              world_.size()));
    if (p.rank == me_ || attached_[p.rank] == p.incarnation) continue;
    // A restarted peer is a new process at a new address (rank 0's World already
    // switched to it when it admitted the rank).
    if (p.incarnation > 0 && me_ != 0)
      world_.replace_peer(p.rank, from_hex(p.address, "a peer address"), p.world_node,
                          from_hex(p.process, "a peer's process identity"));
    buffer_->attach_peer(p.rank, from_hex(p.descriptor, "a peer's region descriptor"));
    attached_[p.rank] = p.incarnation;
  }
  for (int r : ranks_where(g.departs)) buffer_->detach_peer(r);
  emit(report::phase_start_line(me_, world_.local_rank(), static_cast<int>(g.phase)));
  print_connection_changes(g, gi);
}

void PhaseLoop::print_connection_changes(const GlobalPhase& g, std::size_t gi) {
  std::vector<int> added, removed;
  const GlobalPhase* prev = gi > 0 ? &schedule_.phases()[gi - 1] : nullptr;
  // A rank that joins now connects to every active rank, not only to the other newcomers.
  const bool i_join = !(prev && prev->active[me_] && !prev->killed[me_]) || g.new_process[me_];
  for (int r = 0; r < world_.size(); ++r) {
    if (r == me_) continue;
    const bool before = prev && prev->active[r] && !prev->killed[r];
    if (g.active[r] && (i_join || !before || g.new_process[r])) added.push_back(r);
    if (!g.active[r] && before) removed.push_back(r);
  }
  if (!added.empty()) emit(report::connections_added_line(me_, world_.local_rank(), added));
  if (!removed.empty()) emit(report::connections_removed_line(me_, world_.local_rank(), removed));
}

PhaseOutcome PhaseLoop::run(const GlobalPhase& g, std::size_t gi, bool doomed, const AgreeOnFailure& agree) {
  const auto& p = options_.parameters;
  const ElasticPlan& plan = plans_[g.plan];
  const int num_ranks = plan.max_rank() + 1;
  const auto inputs = check::make_rank_inputs({p.num_tokens, p.hidden_dim, p.num_topk}, num_ranks,
                                              p.num_experts_per_rank, me_, p.seed, static_cast<int>(g.plan));
  std::vector<char> active = g.active;
  PhaseOutcome outcome;
  buffer_->set_epoch(phase_epoch(gi, 0));
  calls_->set_inputs(inputs);
  std::vector<double> samples_us, dispatch_us, combine_us;
  const int total = p.warmup + p.iters;
  const bool first_phase = !ran_a_phase_;
  ran_a_phase_ = true;
  for (int i = 0; i < total;) {
    if (first_phase && i == p.warmup &&
        std::find(options_.stop_in_first_phase.begin(), options_.stop_in_first_phase.end(), me_) !=
            options_.stop_in_first_phase.end())
      ::raise(SIGSTOP);  // a failure test holds this rank here (BenchOptions::stop_in_first_phase)
    if (doomed && i == p.warmup) {
      // Really killed, during the phase's dispatch/combine: hyrun is told first so that
      // it neither fails the job nor forgets to restart the rank if the plan brings it back.
      announce_planned_kill(respawned_after(gi), SIGKILL);
      ::raise(SIGKILL);
    }
    Routing routing{num_ranks, std::vector<uint8_t>(active.begin(), active.begin() + num_ranks)};
    const auto start = Clock::now();
    CallTimes us;
    try {
      us = calls_->timed_call(p.num_tokens, routing);
    } catch (const PeerFailureError& e) {
      i = handle_failure(e.ranks(), start, i, active, outcome, agree);
      continue;  // the agreed iteration again, without the failed ranks
    } catch (const PeerTimeoutError& e) {
      i = handle_failure(e.ranks(), start, i, active, outcome, agree);
      continue;
    }
    if (i >= p.warmup) {
      samples_us.push_back(us.total_us);
      dispatch_us.push_back(us.dispatch_us);
      combine_us.push_back(us.combine_us);
    }
    ++i;
  }
  if (p.validate) validate(g.plan, num_ranks, active, outcome);
  if (!samples_us.empty()) {
    const auto timing = report::stats_without_first(std::move(samples_us));
    std::vector<uint8_t> mask(active.begin(), active.begin() + num_ranks);
    const auto selections = count_valid_selections(inputs.topk_idx.data(), p.num_tokens, p.num_topk,
                                                   p.num_experts_per_rank, num_ranks, mask.data());
    report::BandwidthStats stats;
    const double d_bytes = dispatch_bytes(selections, p.hidden_dim, format_);
    const double c_bytes = combine_bytes(selections, p.hidden_dim);
    stats.avg_us = timing.avg;
    stats.min_us = timing.min;
    stats.max_us = timing.max;
    stats.gbps = bandwidth_gbps(d_bytes, c_bytes, timing.avg / 1e6);
    outcome.bandwidth = stats;
    if (options_.kineto) {
      // The reference's --kineto split: each half's bytes over its own mean time.
      report::SplitBandwidth split;
      split.dispatch_avg_us = report::stats_without_first(std::move(dispatch_us)).avg;
      split.combine_avg_us = report::stats_without_first(std::move(combine_us)).avg;
      split.dispatch_gbps = split.dispatch_avg_us > 0 ? d_bytes / 1e9 / (split.dispatch_avg_us / 1e6) : 0;
      split.combine_gbps = split.combine_avg_us > 0 ? c_bytes / 1e9 / (split.combine_avg_us / 1e6) : 0;
      outcome.split = split;
    }
  }
  return outcome;
}

/// Returns the iteration to go on with: the agreed one, the latest any survivor reached.
int PhaseLoop::handle_failure(const std::vector<int>& seen, Clock::time_point call_start, int iteration,
                              std::vector<char>& active, PhaseOutcome& outcome, const AgreeOnFailure& agree) {
  const double detect_ms = ms_since(call_start);
  const msg::Resume resume = agree(seen, detect_ms, iteration);
  for (int r : resume.ranks) {
    if (r < 0 || r >= world_.size())
      throw Error(fmt::format("rank {}: the agreed failed ranks name rank {}, outside the world of {} ranks", me_, r,
                              world_.size()));
    if (!active[r]) continue;
    active[r] = 0;
    outcome.detected.push_back(r);
    buffer_->detach_peer(r);
  }
  std::sort(outcome.detected.begin(), outcome.detected.end());
  if (!outcome.detect_ms) outcome.detect_ms = detect_ms;
  buffer_->set_epoch(resume.epoch);
  return resume.iteration;
}

/// --validate: one more dispatch + combine by every survivor, outputs poisoned first,
/// identity experts, then the reference checks on every element.
void PhaseLoop::validate(std::size_t plan_index, int num_ranks, const std::vector<char>& active,
                         PhaseOutcome& outcome) {
  const auto& p = options_.parameters;
  std::vector<check::RankInputs> all;
  for (int r = 0; r < num_ranks; ++r)
    all.push_back(check::make_rank_inputs({p.num_tokens, p.hidden_dim, p.num_topk}, num_ranks, p.num_experts_per_rank,
                                          r, p.seed, static_cast<int>(plan_index)));
  Routing routing{num_ranks, std::vector<uint8_t>(active.begin(), active.begin() + num_ranks)};
  const check::CheckReport report = calls_->validate(me_, p.num_tokens, routing, all);
  if (!report.ok) outcome.validation_problem = report.problems.empty() ? "a check failed" : report.problems.front();
  emit(fmt::format("[rank {}] validation {}: {} received rows checked, combine diff {:.3g}{}", me_,
                   report.ok ? "passed" : "FAILED", report.rows_checked, report.combine_diff,
                   report.ok ? "" : "; " + *outcome.validation_problem));
}

void PhaseLoop::report(const GlobalPhase& g, const PhaseOutcome& outcome) {
  if (!outcome.detected.empty())
    emit(report::failed_ranks_detected_line(me_, world_.local_rank(), outcome.detected, *outcome.detect_ms));
  if (outcome.bandwidth) emit(report::bandwidth_line(me_, *outcome.bandwidth));
  if (outcome.split) emit(report::split_bandwidth_line(me_, *outcome.split));
  emit(report::phase_end_line(me_, world_.local_rank(), static_cast<int>(g.phase)));
}

}  // namespace hyrun::ep::elastic
