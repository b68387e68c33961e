#include "hyrun/launcher/pmix_service.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <system_error>

namespace hyrun {
namespace {

// Open MPI keeps its shared-memory segments in /dev/shm: the job's own folder there, so that
// a killed rank's segments go with the job.
std::string shared_memory_root() {
  std::error_code ec;
  return std::filesystem::is_directory("/dev/shm", ec) ? "/dev/shm" : PrivateDirectory::temporary_root();
}

// Unique per job on this host: Open MPI derives its job id, and so its segments' names, from it.
std::string job_namespace(const std::string& host) {
  const auto now = std::chrono::steady_clock::now().time_since_epoch();
  return fmt::format("hyrun.{}.{}.{:x}", host, ::getpid(),
                     std::chrono::duration_cast<std::chrono::microseconds>(now).count());
}

}  // namespace

PmixService::PmixService(PrivateDirectory rendezvous, PrivateDirectory shared_memory,
                         std::shared_ptr<const binding::Topology> topology)
    : topology_(std::move(topology)),
      rendezvous_(std::move(rendezvous)),
      shared_memory_(std::move(shared_memory)),
      server_(rendezvous_.path(), topology_ ? topology_->get() : nullptr) {}

std::unique_ptr<PmixService> PmixService::start_local(const std::string& host, int ranks,
                                                      const binding::BindingPlan& plan) {
  auto rendezvous = PrivateDirectory::create(PrivateDirectory::temporary_root(), "hyrun-pmix");
  auto shared_memory = PrivateDirectory::create(shared_memory_root(), "hyrun-shm");
  std::unique_ptr<PmixService> service(
      new PmixService(std::move(rendezvous), std::move(shared_memory), plan.topology()));
  pmix::JobMap map;
  map.nspace = job_namespace(host);
  map.hosts = {host};
  map.ranks.emplace_back();
  for (int r = 0; r < ranks; ++r) map.ranks[0].push_back(static_cast<std::uint32_t>(r));
  for (const auto& placement : plan.ranks()) map.local_cpus.push_back(placement.cpus);
  map.tmpdir = service->rendezvous_.path();
  service->server_.register_job(map);
  spdlog::debug("PMIx server for the job's ranks: namespace {}, sockets in {}", map.nspace, map.tmpdir);
  return service;
}

EnvironmentEntries PmixService::rank_variables(int global_rank) const {
  return server_.client_environment(static_cast<std::uint32_t>(global_rank));
}

EnvironmentEntries PmixService::rank_defaults() const {
  return {
      {"OMPI_MCA_btl_vader_backing_directory", shared_memory_.path()},
      // Outside a Slurm step Open MPI 4 takes a process without its own launcher's variables
      // for a singleton, PMIx server or not; this component is the one that decides so.
      {"OMPI_MCA_schizo", "^orte"},
  };
}

void PmixService::attach(RankSupervisor& supervisor) {
  supervisor_ = &supervisor;
  supervisor.add_participant(*this);
}

void PmixService::add_poll_fds(std::vector<pollfd>& fds) { fds.push_back({server_.event_fd(), POLLIN, 0}); }

bool PmixService::on_poll(const pollfd& p) {
  if (p.fd != server_.event_fd()) return false;
  settle();
  return true;
}

void PmixService::settle() {
  if (supervisor_ == nullptr) return;
  for (const auto& event : server_.take_events()) {
    const int rank = static_cast<int>(event.rank);
    switch (event.kind) {
      case pmix::ClientEvent::Kind::kConnected:
        supervisor_->on_pmix_client(rank, RankSupervisor::PmixClientStep::kConnected);
        break;
      case pmix::ClientEvent::Kind::kFinalized:
        supervisor_->on_pmix_client(rank, RankSupervisor::PmixClientStep::kFinalized);
        break;
      case pmix::ClientEvent::Kind::kAborted: supervisor_->on_pmix_abort(rank, event.status, event.message); break;
    }
  }  // an aborting client is released here, once its abort is the job's
}

}  // namespace hyrun
