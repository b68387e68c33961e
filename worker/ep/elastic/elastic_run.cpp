#include "elastic_run.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <thread>
#include <tuple>

#include "hyrun/ep/reference_checks.hpp"
#include "hyrun/ep/reference_inputs.hpp"
#include "coordinator_link.hpp"
#include "elastic_schedule.hpp"
#include "hyrun/common/hex.hpp"
#include "hyrun/ep/bench/log_lines.hpp"
#include "hyrun/ep/bench/progress_line.hpp"
#include "hyrun/ep/bench/sample_stats.hpp"
#include "hyrun/ep/bench/summary_table.hpp"
#include "ep_calls.hpp"
#include "join_server.hpp"
#include "hyrun/ep/buffer.hpp"
#include "hyrun/ep/layout.hpp"

namespace hyrun::ep::elastic {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

void emit(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

std::string node_name() {
  if (const char* n = std::getenv("SLURMD_NODENAME")) return n;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

/// started_at_launch of the schedule: every rank, or in a staged launch the ranks of rank
/// 0's launch that the first phase uses (the others start when their phase begins).
std::vector<char> started_at_launch(const BenchOptions& options, const std::vector<ElasticPlan>& plans, int world_size) {
  if (!options.staged.staged()) return {};
  std::vector<char> started(static_cast<std::size_t>(world_size), 0);
  for (int r : launch_start_ranks(plans.front(), options.staged.launch_ranks)) started[r] = 1;
  return started;
}

/// Agreed epochs: above every epoch of earlier phases and failure rounds (a phase runs
/// fewer than 2^24 calls).
uint64_t phase_epoch(std::size_t global_phase, int failure_round) {
  return (static_cast<uint64_t>(global_phase + 1) << 32) + (static_cast<uint64_t>(failure_round) << 24);
}

class Runner {
 public:
  Runner(World& world, const BenchOptions& options, std::vector<ElasticPlan> plans)
      : world_(world),
        options_(options),
        plans_(std::move(plans)),
        schedule_(plans_, world.size(), started_at_launch(options, plans_, world.size())),
        me_(world.rank()),
        attached_(static_cast<std::size_t>(world.size()), -1) {
    const auto& p = options_.parameters;
    format_ = p.dispatch_dtype == "bf16" ? Format::kBF16 : Format::kFP8;
    shape_ = Shape{world.size(), p.num_tokens, p.hidden_dim, p.num_topk, p.num_experts_per_rank};
  }

  int run() {
    if (!schedule_.used(me_)) {
      emit(bench::unused_rank_line(me_, world_.local_rank()));
      return 0;
    }
    // No collective: restarted ranks build theirs alone; peers are attached per phase.
    buffer_ = std::make_unique<Buffer>(world_, BufferOptions{shape_, options_.backend,
                                                             std::chrono::milliseconds(options_.parameters.timeout_ms),
                                                             PeerAttach::kDeferred});
    calls_ = std::make_unique<EpCalls>(*buffer_, shape_, format_);
    if (me_ == 0) return coordinate();
    send_json(world_, 0, kToCoordinator,
              {{"type", "register"}, {"incarnation", world_.incarnation()}, {"descriptor", to_hex(buffer_->local_descriptor())}});
    for (;;) {
      json message = recv_json_patiently(kToRank);
      if (message["type"] == "done") {
        // CUDA IPC: nobody frees a region while a peer maps it. Close ours, say so, and
        // free (exit) only once every live rank has closed its own.
        buffer_->close_peers();
        send_json(world_, 0, kToCoordinator, {{"type", "closed"}});
        expect(world_, 0, kToRank, "free");
        return 0;
      }
      if (message["type"] != "phase") throw Error(fmt::format("rank {}: unexpected '{}' between phases", me_, message["type"].get<std::string>()));
      if (run_phase_as_member(message)) return 0;  // left the job
    }
  }

 private:
  // ---------------------------------------------------------------- every rank
  void backend_epoch(uint64_t epoch) { buffer_->set_epoch(epoch); }

  /// hyrun restarts this rank after its planned end when a later phase uses it; in a
  /// staged launch never: the new process is started on request or by a later launch.
  bool respawned_after(std::size_t gi) const { return !options_.staged.staged() && schedule_.used_after(gi, me_); }

  /// Idle ranks wait for the coordinator for as long as it lives.
  json recv_json_patiently(uint32_t tag) {
    for (;;) {
      try {
        return recv_json(world_, 0, tag);
      } catch (const TimeoutError&) {
        if (world_.peer_failed(0)) throw Error(fmt::format("rank {}: the coordinator (rank 0) is gone", me_));
      }
    }
  }

  /// Connects to the peers the phase needs (new processes: new endpoint and region key).
  void attach_peers(const json& peers) {
    for (const auto& p : peers) {
      const int r = p["rank"].get<int>();
      const int incarnation = p["incarnation"].get<int>();
      if (r == me_ || attached_[r] == incarnation) continue;
      // A restarted peer is a new process at a new address (rank 0's World already
      // switched to it when it admitted the rank).
      if (incarnation > 0 && me_ != 0) world_.replace_peer(r, from_hex(p["address"].get<std::string>(), "a peer address"));
      buffer_->attach_peer(r, from_hex(p["descriptor"].get<std::string>(), "a peer's region descriptor"));
      attached_[r] = incarnation;
    }
  }

  struct PhaseOutcome {
    std::optional<bench::BandwidthStats> bandwidth;
    std::optional<bench::SplitBandwidth> split;  // --kineto
    std::vector<int> detected;
    std::optional<double> detect_ms;
    std::optional<std::string> validation_problem;  // --validate: the first failed check
  };

  /// Warm-up and timed iterations of one phase. `on_failure` agrees with the others on the
  /// failed ranks and returns them with the epoch to resume at.
  template <typename OnFailure>
  PhaseOutcome iterate(const GlobalPhase& g, std::size_t gi, std::vector<char> active, bool doomed, OnFailure on_failure) {
    const auto& p = options_.parameters;
    const ElasticPlan& plan = plans_[g.plan];
    const int num_ranks = plan.max_rank() + 1;
    const auto inputs = check::make_rank_inputs({p.num_tokens, p.hidden_dim, p.num_topk}, num_ranks,
                                                p.num_experts_per_rank, me_, p.seed, static_cast<int>(g.plan));
    PhaseOutcome outcome;
    int failure_round = 0;
    backend_epoch(phase_epoch(gi, failure_round));
    calls_->set_inputs(inputs);
    std::vector<double> samples_us, dispatch_us, combine_us;
    const int total = p.warmup + p.iters;
    for (int i = 0; i < total;) {
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
        i = handle_failure(e.ranks(), start, i, active, outcome, failure_round, on_failure);
        continue;  // the agreed iteration again, without the failed ranks
      } catch (const PeerTimeoutError& e) {
        i = handle_failure(e.ranks(), start, i, active, outcome, failure_round, on_failure);
        continue;
      }
      if (i >= p.warmup) {
        samples_us.push_back(us.total_us);
        dispatch_us.push_back(us.dispatch_us);
        combine_us.push_back(us.combine_us);
      }
      ++i;
    }
    if (p.validate) validate(plan, num_ranks, active, outcome);
    if (!samples_us.empty()) {
      const auto timing = bench::stats_without_first(std::move(samples_us));
      std::vector<uint8_t> mask(active.begin(), active.begin() + num_ranks);
      const auto selections = count_valid_selections(inputs.topk_idx.data(), p.num_tokens, p.num_topk,
                                                     p.num_experts_per_rank, num_ranks, mask.data());
      bench::BandwidthStats stats;
      const double d_bytes = dispatch_bytes(selections, p.hidden_dim, format_);
      const double c_bytes = combine_bytes(selections, p.hidden_dim);
      stats.avg_us = timing.avg;
      stats.min_us = timing.min;
      stats.max_us = timing.max;
      stats.gbps = bandwidth_gbps(d_bytes, c_bytes, timing.avg / 1e6);
      outcome.bandwidth = stats;
      if (options_.kineto) {
        // The reference's --kineto split: each half's bytes over its own mean time.
        bench::SplitBandwidth split;
        split.dispatch_avg_us = bench::stats_without_first(std::move(dispatch_us)).avg;
        split.combine_avg_us = bench::stats_without_first(std::move(combine_us)).avg;
        split.dispatch_gbps = split.dispatch_avg_us > 0 ? d_bytes / 1e9 / (split.dispatch_avg_us / 1e6) : 0;
        split.combine_gbps = split.combine_avg_us > 0 ? c_bytes / 1e9 / (split.combine_avg_us / 1e6) : 0;
        outcome.split = split;
      }
    }
    return outcome;
  }

  /// Returns the iteration to go on with. A survivor may see the failure one iteration
  /// early (its last flush to the dying rank fails after the data arrived); all resume at
  /// the latest iteration any of them reached, so that every survivor makes the same calls.
  /// --validate: one more dispatch + combine by every survivor, outputs poisoned first,
  /// identity experts, then the reference checks on every element.
  void validate(const ElasticPlan& plan, int num_ranks, const std::vector<char>& active,
                PhaseOutcome& outcome) {
    const auto& p = options_.parameters;
    std::vector<check::RankInputs> all;
    for (int r = 0; r < num_ranks; ++r)
      all.push_back(check::make_rank_inputs({p.num_tokens, p.hidden_dim, p.num_topk}, num_ranks, p.num_experts_per_rank,
                                            r, p.seed, static_cast<int>(&plan - plans_.data())));
    Routing routing{num_ranks, std::vector<uint8_t>(active.begin(), active.begin() + num_ranks)};
    const check::CheckReport report = calls_->validate(me_, p.num_tokens, routing, all);
    if (!report.ok) outcome.validation_problem = report.problems.empty() ? "a check failed" : report.problems.front();
    emit(fmt::format("[rank {}] validation {}: {} received rows checked, combine diff {:.3g}{}", me_,
                     report.ok ? "passed" : "FAILED", report.rows_checked, report.combine_diff,
                     report.ok ? "" : "; " + *outcome.validation_problem));
  }

  template <typename OnFailure>
  int handle_failure(const std::vector<int>& seen, Clock::time_point call_start, int iteration,
                     std::vector<char>& active, PhaseOutcome& outcome, int& failure_round, OnFailure on_failure) {
    const double detect_ms = ms_since(call_start);
    const auto [failed, epoch, resume_at] = on_failure(seen, detect_ms, iteration);
    for (int r : failed) {
      if (!active[r]) continue;
      active[r] = 0;
      outcome.detected.push_back(r);
      buffer_->detach_peer(r);
    }
    std::sort(outcome.detected.begin(), outcome.detected.end());
    if (!outcome.detect_ms) outcome.detect_ms = detect_ms;
    ++failure_round;
    backend_epoch(epoch);
    return resume_at;
  }

  // ---------------------------------------------------------------- ranks other than 0
  /// Returns true when this process leaves the job in this phase.
  bool run_phase_as_member(const json& message) {
    const std::size_t gi = message["global_phase"].get<std::size_t>();
    const GlobalPhase& g = schedule_.phases()[gi];
    const int phase = static_cast<int>(g.phase);
    if (g.departs[me_]) {
      // The staying ranks close their mapping of this rank's region before they answer
      // "ready"; rank 0 says "free" once all have (CUDA IPC: no region freed while mapped).
      expect(world_, 0, kToRank, "free");
      announce_planned_exit(respawned_after(gi));
      return true;
    }
    attach_peers(message["peers"]);
    for (int r : ranks_where(g.departs)) buffer_->detach_peer(r);
    emit(bench::phase_start_line(me_, world_.local_rank(), phase));
    print_connection_changes(g, gi);
    send_json(world_, 0, kToCoordinator, {{"type", "ready"}});
    expect(world_, 0, kToRank, "go");
    auto outcome = iterate(g, gi, g.active, g.killed[me_], [&](const std::vector<int>& seen, double detect_ms, int iteration) {
      send_json(world_, 0, kToCoordinator,
                {{"type", "failed"}, {"ranks", seen}, {"detect_ms", detect_ms}, {"iteration", iteration}});
      const json resume = expect(world_, 0, kToRank, "resume");
      return std::tuple{resume["ranks"].get<std::vector<int>>(), resume["epoch"].get<uint64_t>(),
                        resume["iteration"].get<int>()};
    });
    report(g, outcome);
    send_json(world_, 0, kToCoordinator, result_message(outcome));
    return false;
  }

  void print_connection_changes(const GlobalPhase& g, std::size_t gi) {
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
    if (!added.empty()) emit(bench::connections_added_line(me_, world_.local_rank(), added));
    if (!removed.empty()) emit(bench::connections_removed_line(me_, world_.local_rank(), removed));
  }

  void report(const GlobalPhase& g, const PhaseOutcome& outcome) {
    const int phase = static_cast<int>(g.phase);
    if (!outcome.detected.empty())
      emit(bench::failed_ranks_detected_line(me_, world_.local_rank(), outcome.detected, *outcome.detect_ms));
    if (outcome.bandwidth) emit(bench::bandwidth_line(me_, *outcome.bandwidth));
    if (outcome.split) emit(bench::split_bandwidth_line(me_, *outcome.split));
    emit(bench::phase_end_line(me_, world_.local_rank(), phase));
  }

  json result_message(const PhaseOutcome& outcome) const {
    json m{{"type", "result"}, {"node", node_name()}, {"local_rank", world_.local_rank()}, {"detected", outcome.detected}};
    if (outcome.bandwidth)
      m["bandwidth"] = {outcome.bandwidth->gbps, outcome.bandwidth->avg_us, outcome.bandwidth->min_us,
                        outcome.bandwidth->max_us};
    if (outcome.detect_ms) m["detect_ms"] = *outcome.detect_ms;
    if (outcome.split)
      m["split"] = {outcome.split->dispatch_gbps, outcome.split->dispatch_avg_us, outcome.split->combine_gbps,
                    outcome.split->combine_avg_us};
    if (outcome.validation_problem) m["validation_problem"] = *outcome.validation_problem;
    return m;
  }

  // ---------------------------------------------------------------- rank 0
  struct Member {
    int incarnation = 0;
    std::string address, descriptor;
    bool alive = true;
    std::string node;    // from the rank's last result
    int local_rank = 0;
  };

  int coordinate() {
    members_.resize(static_cast<std::size_t>(world_.size()));
    members_[0] = {world_.incarnation(), to_hex(world_.own_address()), to_hex(buffer_->local_descriptor()), true,
                   node_name(), world_.local_rank()};
    for (int r = 1; r < world_.size(); ++r) {
      if (!schedule_.used(r) || !schedule_.started_at_launch(r)) {
        members_[r].alive = false;
        continue;
      }
      const json reg = expect(world_, r, kToCoordinator, "register");
      members_[r].descriptor = reg["descriptor"].get<std::string>();
    }
    open_join_server();
    bench::ProgressLine progress;
    std::vector<bench::PhaseSample> samples;
    std::vector<std::optional<double>> durations;
    const auto& phases = schedule_.phases();
    for (std::size_t gi = 0; gi < phases.size(); ++gi) {
      const GlobalPhase& g = phases[gi];
      progress.update(g.phase, plans_[g.plan].num_phases(), fmt::format("plan {} of {}", g.plan + 1, plans_.size()));
      const auto phase_start = Clock::now();
      for (int r : ranks_where(g.departs)) release(r);
      admit_new_processes(g, gi);
      run_phase_as_coordinator(g, gi, phase_start, samples);
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
      if (members_[r].alive) alive.push_back(r);
    for (int r : alive) send_json(world_, r, kToRank, {{"type", "done"}});
    // Regions are freed only when no rank maps them any more (see the members' "done").
    for (int r : alive) expect(world_, r, kToCoordinator, "closed");
    buffer_->close_peers();
    for (int r : alive) send_json(world_, r, kToRank, {{"type", "free"}});
    if (!invalid_.empty())
      throw Error(fmt::format("--validate: {} check(s) failed; first: {}", invalid_.size(), invalid_.front()));
    return 0;
  }

  /// Staged launches: rank 0 serves joins of later launches (--join-port).
  void open_join_server() {
    const auto& staged = options_.staged;
    if (!staged.staged() || staged.join_port < 0) return;
    pool_.emplace(staged.launch_ranks, world_.size(), node_name());
    join::Grant grant;
    grant.world_size = world_.size();
    grant.launch_ranks = staged.launch_ranks;
    grant.root_address = to_hex(world_.own_address());
    const char* token = std::getenv("HYRUN_JOB_TOKEN");
    join_server_ = std::make_unique<JoinServer>(staged.join_port, token ? token : "", grant, node_name(), *pool_);
    spdlog::info("rank 0: join server listening on TCP port {}", join_server_->port());
  }

  /// True when rank 0's launch starts `rank`'s next process (on request) rather than a later launch.
  bool starts_locally(int rank) const {
    const auto& staged = options_.staged;
    return staged.staged() && rank < staged.launch_ranks && (!ever_started(rank) || staged.restart_returning);
  }
  bool ever_started(int rank) const { return schedule_.started_at_launch(rank) || requested_[rank]; }

  /// A rank that left or was killed: a later launch may take it (the reference's rank server).
  void release(int rank) {
    if (!pool_ || released_[rank] || starts_locally(rank)) return;
    released_[rank] = 1;
    pool_->release(rank);
  }

  void admit_new_processes(const GlobalPhase& g, std::size_t gi) {
    std::vector<int> waiting = ranks_where(g.new_process);
    for (int r : waiting) {
      released_[r] = 0;  // back in the job
      if (!starts_locally(r)) continue;
      request_rank_start(r);  // hyrun starts its process now: the join time includes the start
      requested_[r] = 1;
    }
    const auto limit = options_.staged.staged() ? std::chrono::milliseconds(options_.parameters.timeout_ms) : world_.timeout();
    const auto deadline = Clock::now() + limit;
    while (!waiting.empty()) {
      // A launch may start a rank before its phase: its join is kept until then.
      for (auto& rejoin : world_.accept_rejoins()) early_[rejoin.rank] = std::move(rejoin.address);
      for (auto it = waiting.begin(); it != waiting.end();) {
        const auto found = early_.find(*it);
        if (found == early_.end()) {
          ++it;
          continue;
        }
        const json reg = expect(world_, *it, kToCoordinator, "register");
        auto& m = members_[*it];
        m.incarnation = ++admissions_[*it];  // peers attach a process once per admission
        m.address = to_hex(found->second);
        m.descriptor = reg["descriptor"].get<std::string>();
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
          if (!ours.empty()) how += fmt::format("; rank 0's launch started [{}] (see its log for why they did not join)", fmt::join(ours, ", "));
          if (!theirs.empty())
            how += fmt::format("; [{}] must come from a later launch: ep-elastic --tcp-server {} --port {} --num-processes {}",
                               fmt::join(theirs, ", "), node_name(), options_.staged.join_port, theirs.size());
        }
        throw TimeoutError(fmt::format("rank 0: rank(s) {} that phase {} of plan {} needs did not join within {} ms{}",
                                       fmt::join(waiting, ", "), phase.phase, phase.plan + 1, limit.count(), how));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  void run_phase_as_coordinator(const GlobalPhase& g, std::size_t gi, Clock::time_point phase_start,
                                std::vector<bench::PhaseSample>& samples) {
    const int phase = static_cast<int>(g.phase);
    json peers = json::array();
    for (int r : ranks_where(g.active))
      peers.push_back({{"rank", r}, {"incarnation", members_[r].incarnation}, {"address", members_[r].address},
                       {"descriptor", members_[r].descriptor}});
    std::vector<int> leaving;  // told to leave: they wait for "free"
    for (int r = 1; r < world_.size(); ++r) {
      if (!(g.active[r] || g.departs[r]) || !members_[r].alive) continue;
      send_json(world_, r, kToRank, {{"type", "phase"}, {"global_phase", gi}, {"peers", peers}});
      if (g.departs[r]) {
        members_[r].alive = false;
        leaving.push_back(r);
      }
    }
    attach_peers(peers);
    for (int r : ranks_where(g.departs)) buffer_->detach_peer(r);
    emit(bench::phase_start_line(0, world_.local_rank(), phase));
    print_connection_changes(g, gi);
    std::vector<std::optional<double>> join_ms(static_cast<std::size_t>(world_.size()));
    for (int r : ranks_where(g.active)) {
      if (r == 0) continue;
      expect(world_, r, kToCoordinator, "ready");
      join_ms[r] = ms_since(phase_start);  // a new process's start and admission included
    }
    // Every staying rank detached the departing ones before its "ready": they may go.
    for (int r : leaving) send_json(world_, r, kToRank, {{"type", "free"}});
    for (int r : ranks_where(g.active))
      if (r != 0) send_json(world_, r, kToRank, {{"type", "go"}});

    std::vector<char> failed_so_far(static_cast<std::size_t>(world_.size()), 0);
    std::map<int, double> detect_ms_of;
    auto outcome = iterate(g, gi, g.active, false, [&](const std::vector<int>& seen, double my_ms, int my_iteration) {
      int resume_at = my_iteration;
      // Gather every other survivor's report; the union is the agreed failed set.
      std::vector<char> failed = failed_so_far;
      for (int r : seen) failed[r] = 1;
      detect_ms_of[0] = my_ms;
      for (int r : ranks_where(g.active)) {
        if (r == 0 || failed[r] || world_.peer_failed(r)) {
          if (r != 0) failed[r] = 1;
          continue;
        }
        const json report = expect(world_, r, kToCoordinator, "failed");
        for (int f : report["ranks"].get<std::vector<int>>()) failed[f] = 1;
        resume_at = std::max(resume_at, report["iteration"].get<int>());
        detect_ms_of.emplace(r, report["detect_ms"].get<double>());
      }
      std::vector<int> newly;
      for (int r = 0; r < world_.size(); ++r)
        if (failed[r] && !failed_so_far[r]) newly.push_back(r);
      // Before any survivor can print this phase's end (a later launch waits for it).
      for (int r : newly) release(r);
      failed_so_far = failed;
      const uint64_t epoch = phase_epoch(gi, static_cast<int>(ranks_where(failed_so_far).size()));
      for (int r : ranks_where(g.active))
        if (r != 0 && !failed_so_far[r])
          send_json(world_, r, kToRank, {{"type", "resume"}, {"ranks", newly}, {"epoch", epoch}, {"iteration", resume_at}});
      return std::tuple{newly, epoch, resume_at};
    });
    report(g, outcome);

    for (int r : ranks_where(failed_so_far)) members_[r].alive = false;
    for (int r : ranks_where(g.killed)) {
      members_[r].alive = false;
      release(r);
    }
    const ElasticPlan& plan = plans_[g.plan];
    for (int r = 0; r < world_.size(); ++r) {
      const PhaseRole role = plan.role(g.phase, r);
      if (role == PhaseRole::idle) continue;
      bench::PhaseSample s;
      s.phase = phase;
      s.rank = r;
      s.state = role;
      s.join_ms = role == PhaseRole::joined ? join_ms[r] : std::nullopt;
      s.node = members_[r].node;  // as last reported (left and killed ranks report nothing now)
      s.local_rank = members_[r].local_rank;
      if (r == 0) {
        if (outcome.validation_problem)
          invalid_.push_back(fmt::format("rank 0 in phase {}: {}", phase, *outcome.validation_problem));
        s.node = node_name();
        s.local_rank = world_.local_rank();
        s.bandwidth = outcome.bandwidth;
        s.split = outcome.split;
        s.detected_ranks = outcome.detected;
        s.detect_ms = outcome.detect_ms;
      } else if (role == PhaseRole::active || role == PhaseRole::joined) {
        if (failed_so_far[r]) continue;
        const json result = expect(world_, r, kToCoordinator, "result");
        s.node = members_[r].node = result["node"].get<std::string>();
        s.local_rank = members_[r].local_rank = result["local_rank"].get<int>();
        if (result.contains("bandwidth")) {
          const auto b = result["bandwidth"];
          s.bandwidth = bench::BandwidthStats{b[0].get<double>(), b[1].get<double>(), b[2].get<double>(), b[3].get<double>()};
        }
        if (result.contains("split")) {
          const auto b = result["split"];
          s.split = bench::SplitBandwidth{b[0].get<double>(), b[1].get<double>(), b[2].get<double>(), b[3].get<double>()};
        }
        s.detected_ranks = result["detected"].get<std::vector<int>>();
        if (result.contains("detect_ms")) s.detect_ms = result["detect_ms"].get<double>();
        if (result.contains("validation_problem"))
          invalid_.push_back(fmt::format("rank {} in phase {}: {}", r, phase, result["validation_problem"].get<std::string>()));
      }
      samples.push_back(std::move(s));
    }
    if (options_.parameters.validate_phase_failures) {
      const auto expected = ranks_where(g.killed);
      const auto detected = ranks_where(failed_so_far);
      if (expected != detected)
        throw Error(fmt::format("phase {} of plan {}: detected failed ranks [{}], the plan killed [{}] "
                                "(--validate-phase-failures)",
                                phase, g.plan, fmt::join(detected, ", "), fmt::join(expected, ", ")));
    }
  }

  void finish_plan(std::size_t plan_index, const std::vector<bench::PhaseSample>& samples,
                   const std::vector<std::optional<double>>& durations) {
    const ElasticPlan& plan = plans_[plan_index];
    std::fputs(bench::format_summary(samples, plan.num_phases(), bench::SummaryOptions::for_stream(stdout)).c_str(), stdout);
    std::fflush(stdout);
    if (options_.report_dir.empty()) return;
    bench::RunResults results{options_.parameters, plan, samples, durations};
    const std::string dir = plans_.size() == 1 ? options_.report_dir
                                               : fmt::format("{}/plan-{}", options_.report_dir, plan_index + 1);
    const auto files = bench::write_report(dir, results);
    if (!files.plot_warning.empty()) std::fprintf(stderr, "ep-bench: %s\n", files.plot_warning.c_str());
  }

  World& world_;
  const BenchOptions& options_;
  std::vector<ElasticPlan> plans_;
  ElasticSchedule schedule_;
  int me_;
  Shape shape_{};
  Format format_ = Format::kFP8;
  std::unique_ptr<Buffer> buffer_;  // the EP front: backend and transport
  std::unique_ptr<EpCalls> calls_;  // the call tensors in the backend's memory
  std::vector<int> attached_;  // incarnation of each peer whose region key is attached; -1 none
  std::vector<Member> members_;
  // Rank 0, staged launches:
  std::optional<RankPool> pool_;
  std::unique_ptr<JoinServer> join_server_;
  std::vector<char> requested_ = std::vector<char>(static_cast<std::size_t>(world_.size()), 0);  // started on request
  std::vector<char> released_ = std::vector<char>(static_cast<std::size_t>(world_.size()), 0);   // given back to the pool
  std::vector<int> admissions_ = std::vector<int>(static_cast<std::size_t>(world_.size()), 0);
  std::map<int, std::vector<std::byte>> early_;  // admitted by the World, not yet by a phase
  std::vector<std::string> invalid_;  // rank 0: failed --validate checks
};

}  // namespace

int run_elastic_bench(World& world, const BenchOptions& options) {
  std::vector<ElasticPlan> plans;
  const auto& p = options.parameters;
  for (const auto& text : options.plans) {
    plans.push_back(ElasticPlan::from_option(text, world.size()));
    // Each token picks --num-topk distinct experts among the plan's.
    const int experts = plans.back().num_experts(p.num_experts_per_rank);
    if (p.num_topk > experts)
      throw UsageError(fmt::format("--num-topk {} is larger than the {} experts of plan {} ({} per rank x {} ranks): "
                                   "give --num-topk {} or less, or more --num-experts-per-rank",
                                   p.num_topk, experts, plans.back().source(), p.num_experts_per_rank,
                                   plans.back().max_rank() + 1, experts));
  }
  Runner runner(world, options, std::move(plans));
  return runner.run();
}

}  // namespace hyrun::ep::elastic
