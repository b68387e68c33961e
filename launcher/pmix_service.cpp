#include "hyrun/launcher/pmix_service.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <system_error>

#include "hyrun/pmix/admitted_connections.hpp"

namespace hyrun {
namespace {

// Where Open MPI 4 keeps its shared-memory segments, as a user (or an outer hyrun) set it.
constexpr const char* kSegmentsVariable = "OMPI_MCA_btl_vader_backing_directory";

// Open MPI keeps its shared-memory segments in /dev/shm, or where the user said: the job's
// own folder there, so that a killed rank's segments go with the job. Its own folder per
// task, too: Open MPI names a segment after the machine, the job and the local rank, so two
// tasks on one machine (srun's, or a hyrun under hyrun) would otherwise map each other's.
std::string shared_memory_root() {
  std::error_code ec;
  if (const char* chosen = std::getenv(kSegmentsVariable); chosen != nullptr && *chosen != '\0') {
    if (std::filesystem::is_directory(chosen, ec)) return chosen;
    spdlog::warn("{}={} is not a directory; Open MPI's segments go to the default place", kSegmentsVariable, chosen);
  }
  return std::filesystem::is_directory("/dev/shm", ec) ? "/dev/shm" : PrivateDirectory::temporary_root();
}

}  // namespace

PmixService::PmixService(PrivateDirectory rendezvous, PrivateDirectory shared_memory,
                         std::shared_ptr<const binding::Topology> topology, const pmix::NodeName& node)
    : topology_(std::move(topology)),
      rendezvous_(std::move(rendezvous)),
      shared_memory_(std::move(shared_memory)),
      server_(rendezvous_.path(), node, topology_ ? topology_->get() : nullptr) {}

std::unique_ptr<PmixService> PmixService::start(const ServedJob& job, const JobLayout& layout, int task,
                                                const binding::BindingPlan& plan) {
  if (static_cast<int>(job.hosts.size()) != layout.tasks())
    throw Error(fmt::format("the PMIx job has {} hosts for {} tasks", job.hosts.size(), layout.tasks()));
  auto rendezvous = PrivateDirectory::create(PrivateDirectory::temporary_root(), "hyrun-pmix");
  auto shared_memory = PrivateDirectory::create(shared_memory_root(), "hyrun-shm");
  pmix::JobMap map;
  map.nspace = job.nspace;
  map.hosts.resize(static_cast<std::size_t>(layout.nodes()));
  for (int t = layout.tasks() - 1; t >= 0; --t)  // a node's host: its first task's
    map.hosts[static_cast<std::size_t>(layout.task(t).node)] = job.hosts[static_cast<std::size_t>(t)];
  for (int n = 0; n < layout.nodes(); ++n) {
    auto& node = map.ranks.emplace_back();
    for (const int r : layout.ranks_on_node(n)) node.push_back(static_cast<std::uint32_t>(r));
  }
  map.node = static_cast<std::size_t>(layout.task(task).node);
  for (const auto& placement : plan.ranks()) map.local_cpus.push_back(placement.cpus);
  map.tmpdir = rendezvous.path();
  const pmix::NodeName node{map.hosts[map.node], static_cast<std::uint32_t>(map.node)};
  std::unique_ptr<PmixService> service(
      new PmixService(std::move(rendezvous), std::move(shared_memory), plan.topology(), node));
  service->server_.register_job(map);
  spdlog::debug("PMIx server for the job's ranks: namespace {}, node {} of {} ({}), sockets in {}", map.nspace,
                map.node, map.hosts.size(), node.host, map.tmpdir);
  return service;
}

EnvironmentEntries PmixService::rank_variables(int global_rank) const {
  auto variables = server_.client_environment(static_cast<std::uint32_t>(global_rank));
  variables.emplace_back(kSegmentsVariable, shared_memory_.path());  // inside the inherited one, if any
  return variables;
}

EnvironmentEntries PmixService::rank_defaults() const {
  return {
      // Outside a Slurm step Open MPI 4 takes a process without its own launcher's variables
      // for a singleton, PMIx server or not; this component is the one that decides so.
      {"OMPI_MCA_schizo", "^orte"},
  };
}

void PmixService::attach(RankSupervisor& supervisor) {
  supervisor_ = &supervisor;
  supervisor.add_participant(*this);
}

void PmixService::relay_to(CrossNodeRequests& relay) {
  relay_ = &relay;
  for (auto& event : std::exchange(held_, {})) to_relay(event);
}

void PmixService::to_relay(pmix::ClientEvent& event) {
  if (relay_ == nullptr) return held_.push_back(std::move(event));
  switch (event.kind) {
    case pmix::ClientEvent::Kind::kFence: relay_->fence(std::move(event.request)); break;
    case pmix::ClientEvent::Kind::kDirectModex: relay_->direct_modex(event.rank, std::move(event.request)); break;
    case pmix::ClientEvent::Kind::kLocalData:
      relay_->local_data(event.id, event.status == 0, std::move(event.message));
      break;
    default: break;
  }
}

void PmixService::add_poll_fds(std::vector<pollfd>& fds) { fds.push_back({server_.event_fd(), POLLIN, 0}); }

bool PmixService::on_poll(const pollfd& p) {
  if (p.fd != server_.event_fd()) return false;
  settle();
  return true;
}

std::chrono::steady_clock::time_point PmixService::wake_by() const {
  return pmix::any_admitted_unjudged() ? std::max(next_judging_, std::chrono::steady_clock::now())
                                       : std::chrono::steady_clock::time_point::max();
}

void PmixService::on_tick() {
  const auto now = std::chrono::steady_clock::now();
  if (supervisor_ == nullptr || now < next_judging_) return;
  next_judging_ = now + std::chrono::seconds(1);
  settle();  // the connections completed so far count
  pmix::judge_admitted([this](const pmix::AdmittedConnection& c) {
    return !c.child || supervisor_->judge_pmix_handshake(*c.child, c.admitted);
  });
}

void PmixService::settle() {
  if (supervisor_ == nullptr) return;
  for (auto& event : server_.take_events()) {
    const int rank = static_cast<int>(event.rank);
    switch (event.kind) {
      case pmix::ClientEvent::Kind::kConnected:
        supervisor_->on_pmix_client(rank, RankSupervisor::PmixClientStep::kConnected);
        break;
      case pmix::ClientEvent::Kind::kFinalized:
        supervisor_->on_pmix_client(rank, RankSupervisor::PmixClientStep::kFinalized);
        break;
      case pmix::ClientEvent::Kind::kAborted: supervisor_->on_pmix_abort(rank, event.status, event.message); break;
      case pmix::ClientEvent::Kind::kFence:
      case pmix::ClientEvent::Kind::kDirectModex:
      case pmix::ClientEvent::Kind::kLocalData: to_relay(event); break;
    }
  }  // an aborting client is released here, once its abort is the job's
}

}  // namespace hyrun
