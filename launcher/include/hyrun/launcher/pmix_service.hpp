#pragma once
// hyrun's PMIx service for this node's ranks, in local and hybrid mode: the PMIx server
// (hyrun/pmix/server.hpp) with the whole job registered as one namespace, the private
// directories of the job's PMIx sockets and of its MPI shared-memory segments, and the
// server's events in the rank supervisor's loop (fences and direct modex across nodes go to
// the relay, pmix_relay.hpp). MPI programs then run under hyrun without a flag: rank 0's
// PMIx_Init tells hyrun to start the others without waiting for a UCX address, MPI_Abort
// ends the job with its status, a rank that exits without MPI_Finalize fails it, and so does
// one whose handshake libpmix never completes (admitted_connections.hpp).
// Everything it made goes when it does: the server first, then the directories.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "hyrun/binding/binding_plan.hpp"
#include "hyrun/common/job_layout.hpp"
#include "hyrun/launcher/rank_environment.hpp"
#include "hyrun/launcher/rank_service.hpp"
#include "hyrun/launcher/rank_supervisor.hpp"
#include "hyrun/launcher/root_exchange.hpp"
#include "hyrun/pmix/admitted_connections.hpp"
#include "hyrun/pmix/server.hpp"
#include "hyrun/process/poll_participant.hpp"
#include "hyrun/process/private_directory.hpp"

namespace hyrun {

/// Where a job across nodes sends what its server hands to the host (pmix_relay.hpp).
class CrossNodeRequests {
 public:
  virtual ~CrossNodeRequests() = default;
  /// This node's part of the job's next fence.
  virtual void fence(std::shared_ptr<pmix::PendingRequest> fence) = 0;
  /// A client wants `rank`'s data, which another node holds.
  virtual void direct_modex(std::uint32_t rank, std::shared_ptr<pmix::PendingRequest> request) = 0;
  /// The answer to PmixService::serve_local_data(rank, id).
  virtual void local_data(std::uint64_t id, bool ok, std::string data) = 0;
};

class PmixService final : public PollParticipant, public RankService {
 public:
  /// The service for task `task` of `job` (one namespace for every task), laid out as
  /// `layout` (job.hosts: each task's host), this task's ranks bound as `plan` says. Throws
  /// hyrun::Error when the server or a directory cannot be made.
  static std::unique_ptr<PmixService> start(const ServedJob& job, const JobLayout& layout, int task,
                                            const binding::BindingPlan& plan);
  ~PmixService() override = default;

  /// What a rank needs to reach the server as `global_rank`, and where Open MPI keeps its
  /// shared-memory segments: this task's private directory, made inside the directory that
  /// OMPI_MCA_btl_vader_backing_directory named when hyrun started, if it names one.
  EnvironmentEntries rank_variables(int global_rank) const override;
  /// Defaults for MPI libraries (a variable the user set wins): Open MPI's PMIx launch
  /// component outside Slurm.
  EnvironmentEntries rank_defaults() const override;

  /// From now on the server's events reach `supervisor`, which must outlive this service's
  /// part in its loop.
  void attach(RankSupervisor& supervisor);
  /// A job across nodes: what the server hands to the host goes to `relay` (which must
  /// outlive this service's loop), what came before it first.
  void relay_to(CrossNodeRequests& relay);
  /// Asks the server for what this node's `rank` committed; the answer goes to the relay's
  /// local_data with `id`.
  void serve_local_data(std::uint32_t rank, std::uint64_t id) { server_.serve_local_data(rank, id); }
  /// Removes the job's directories now, for a process that ends without destructors (hyrun
  /// aborting the job through PMIx): the server's sockets and MPI's segments go with them.
  void remove_files() noexcept {
    rendezvous_.remove();
    shared_memory_.remove();
  }

  void add_poll_fds(std::vector<pollfd>& fds) override;
  bool on_poll(const pollfd& p) override;
  /// Once a second while a connection's handshake waits to be judged.
  std::chrono::steady_clock::time_point wake_by() const override;
  /// Has the supervisor judge the connections whose handshake has not completed.
  void on_tick() override;
  void settle() override;
  /// Whether libpmix still holds a connection from the process tree of `pid`.
  bool still_reading(pid_t pid) const override { return pmix::any_held_under(pid); }

 private:
  PmixService(PrivateDirectory rendezvous, PrivateDirectory shared_memory,
              std::shared_ptr<const binding::Topology> topology, const pmix::NodeName& node);
  void to_relay(pmix::ClientEvent& event);

  std::shared_ptr<const binding::Topology> topology_;  // the server's: it outlives it
  PrivateDirectory rendezvous_;                        // the server's sockets: only this user can reach them
  PrivateDirectory shared_memory_;                     // MPI's segments, killed ranks' too
  pmix::Server server_;                                // finalized before the directories go
  RankSupervisor* supervisor_ = nullptr;
  CrossNodeRequests* relay_ = nullptr;
  // Requests that came before the relay: they fail, if still here, before the server goes.
  std::vector<pmix::ClientEvent> held_;
  std::chrono::steady_clock::time_point next_judging_{};
};

}  // namespace hyrun
