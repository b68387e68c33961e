#include "member.hpp"

#include <fmt/format.h>

#include <type_traits>
#include <variant>

#include "coordinator_link.hpp"
#include "hyrun/common/hex.hpp"

namespace hyrun::ep::elastic {

Member::Member(World& world, const ElasticSchedule& schedule, PhaseLoop& loop)
    : world_(world), schedule_(schedule), loop_(loop), me_(world.rank()) {}

template <class... Ms>
auto Member::expect_patiently() {
  for (;;) {
    try {
      return expect_one_of<Ms...>(world_, 0);
    } catch (const TimeoutError&) {
      if (world_.peer_failed(0)) throw Error(fmt::format("rank {}: the coordinator (rank 0) is gone", me_));
    }
  }
}

int Member::run() {
  send(world_, 0, msg::Register{world_.incarnation(), to_hex(loop_.buffer().local_descriptor())});
  for (;;) {
    auto message = expect_patiently<msg::Phase, msg::Done>();
    if (std::holds_alternative<msg::Done>(message)) {
      // CUDA IPC: nobody frees a region while a peer maps it. Close ours, say so, and
      // free (exit) only once every live rank has closed its own.
      loop_.buffer().close_peers();
      send(world_, 0, msg::Closed{});
      expect<msg::Free>(world_, 0);
      return 0;
    }
    if (run_phase(std::get<msg::Phase>(message))) return 0;  // left the job
  }
}

bool Member::run_phase(const msg::Phase& message) {
  if (message.global_phase >= schedule_.phases().size())
    throw Error(fmt::format("rank {}: the coordinator names phase {}, but the plans have {} phases", me_,
                            message.global_phase, schedule_.phases().size()));
  const std::size_t gi = message.global_phase;
  const GlobalPhase& g = schedule_.phases()[gi];
  if (g.departs[me_]) {
    // The staying ranks close their mapping of this rank's region before they answer
    // Ready; rank 0 says Free once all have (CUDA IPC: no region freed while mapped).
    expect<msg::Free>(world_, 0);
    announce_planned_exit(loop_.respawned_after(gi));
    return true;
  }
  loop_.enter(g, gi, message.peers);
  send(world_, 0, msg::Ready{});
  expect<msg::Go>(world_, 0);
  const auto outcome =
      loop_.run(g, gi, g.killed[me_], [&](const std::vector<int>& seen, double detect_ms, int iteration) {
        send(world_, 0, msg::Failed{seen, detect_ms, iteration});
        return expect<msg::Resume>(world_, 0);
      });
  loop_.report(g, outcome);
  send(world_, 0,
       msg::Result{node_name(), world_.local_rank(), outcome.detected, outcome.bandwidth, outcome.split,
                   outcome.detect_ms, outcome.validation_problem});
  return false;
}

}  // namespace hyrun::ep::elastic
