#pragma once
// hyrun's PMIx server for the ranks it starts (libpmix's server API): MPI libraries, mpi4py
// and any other PMIx client run under hyrun as under srun or mpirun.
//
// Contract:
//  - At most one Server exists in a process, and never beside a pmix::Client (libpmix holds
//    one identity per process). Its destructor finalizes libpmix and removes its private
//    rendezvous directory, on every path.
//  - Only this user's processes can reach it: its rendezvous files live in a directory of
//    mode 0700, its loopback TCP port admits only connections of this uid (accept_filter.cpp),
//    and libpmix admits a client only with the namespace and rank registered here.
//  - Its end is bounded: when PMIx_server_finalize does not return within 5 s, it is left
//    (said in a warning) rather than waited for; after a client was lost without finalizing,
//    it is not called at all (libpmix 4.2.2 can crash in it then).
//  - libpmix calls the host's functions on its own progress thread. They only queue an
//    event and wake the owner's poll loop (event_fd()); the owner reads them with
//    take_events() on its own thread.
//  - A client that calls PMIx_Abort waits until the event that says so is destroyed: hyrun
//    learns of the abort (the rank, its status and message) before it can see the rank's end.
#include <hwloc.h>

#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hyrun/common/unique_fd.hpp"
#include "hyrun/pmix/job_map.hpp"

namespace hyrun::pmix {

/// A request that libpmix handed to the host and that other nodes answer: a fence over the
/// whole job across nodes (every rank of this node joined it; `data` is this node's part,
/// completed with every node's parts in node order), or a direct modex (the data of a rank
/// of another node, completed with what that node's server holds). Completed once; one that
/// its owner drops without completing fails, so that no client waits for ever.
class PendingRequest {
 public:
  /// How it ended: done (with the data), failed (a node or the link went: the client is told
  /// PMIX_ERR_LOST_CONNECTION, or NOT_FOUND for a direct modex), or refused as more data than
  /// hyrun relays (PMIX_ERR_OUT_OF_RESOURCE).
  enum class Outcome { kDone, kFailed, kTooLarge };
  using Completer = std::function<void(Outcome outcome, std::string data)>;
  PendingRequest(std::string data, Completer completer) : data_(std::move(data)), completer_(std::move(completer)) {}
  ~PendingRequest() { fail(); }
  PendingRequest(const PendingRequest&) = delete;
  PendingRequest& operator=(const PendingRequest&) = delete;

  const std::string& data() const { return data_; }
  void complete(std::string data) { finish(Outcome::kDone, std::move(data)); }
  /// The client's call (PMIx_Fence for MPI_Init or MPI_Finalize, PMIx_Get) fails.
  void fail() { finish(Outcome::kFailed, {}); }
  /// The same, for data past the relay's limit.
  void refuse_as_too_large() { finish(Outcome::kTooLarge, {}); }

 private:
  void finish(Outcome outcome, std::string data) {
    if (auto completer = std::exchange(completer_, nullptr)) completer(outcome, std::move(data));
  }
  std::string data_;
  Completer completer_;
};

/// What a rank did through PMIx, in the order libpmix saw it, and what the host must answer.
struct ClientEvent {
  enum class Kind {
    kConnected,    ///< PMIx_Init (MPI_Init)
    kFinalized,    ///< PMIx_Finalize (MPI_Finalize)
    kAborted,      ///< PMIx_Abort (MPI_Abort): `status`, `message`
    kFence,        ///< this node's part of a fence across nodes: `request`
    kDirectModex,  ///< a client wants the data of `rank`, of another node: `request`
    kLocalData,    ///< serve_local_data's answer for `id`: `status` 0 and `message` the data, or not 0
  };
  Kind kind = Kind::kConnected;
  std::uint32_t rank = 0;
  int status = 0;
  std::string message;
  /// Holds the aborting client until this event (and every copy of it) is gone.
  std::shared_ptr<void> hold;
  std::shared_ptr<PendingRequest> request;
  std::uint64_t id = 0;
};

/// A node of the job map: its host name there and its index.
struct NodeName {
  std::string host;
  std::uint32_t id = 0;
};

class Server {
 public:
  /// Starts libpmix's server with its rendezvous files in `rendezvous_dir` (private to this
  /// user), on the node's hwloc `topology` (which must outlive the server; without it
  /// libpmix loads its own, ~25 ms). `node` is this node as the job map names it: libpmix
  /// files a lone node-level key under the server's host name and tells it to the ranks
  /// (PMIX_HOSTNAME), so it must be the map's, not the machine's, where two tasks share a
  /// machine. Throws hyrun::Error with libpmix's status when it cannot.
  Server(const std::string& rendezvous_dir, const NodeName& node, hwloc_topology_t topology);
  ~Server();  ///< releases held clients, then PMIx_server_finalize
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Registers the job's namespace and this node's ranks (as this process's uid/gid).
  /// Blocks until libpmix has taken them in (bounded: it is local work). With more than
  /// one node, fences over the whole job come as kFence events for the host to relay;
  /// fences over some ranks of several nodes are refused (PMIX_ERR_NOT_SUPPORTED).
  void register_job(const JobMap& map);
  const std::string& nspace() const { return nspace_; }
  /// Whether the job spans nodes: fences and direct modex then wait for the host (kFence,
  /// kDirectModex events).
  bool relays_fences() const { return relay_fences_; }
  /// Asks libpmix for what this node's `rank` committed (waiting until it has), for a
  /// direct modex of another node; the answer comes as a kLocalData event with `id`.
  void serve_local_data(std::uint32_t rank, std::uint64_t id);

  /// The variables a child needs to reach this server as `rank` (PMIx_server_setup_fork):
  /// PMIX_NAMESPACE, PMIX_RANK, the server's URI and the library's modules.
  std::vector<std::pair<std::string, std::string>> client_environment(std::uint32_t rank) const;

  /// Readable when events are queued (an eventfd); read it with take_events().
  int event_fd() const { return events_fd_.get(); }
  /// The queued events, oldest first; clears the eventfd.
  std::vector<ClientEvent> take_events();

  /// For the upcalls (libpmix's thread): queue `event` and wake the owner.
  void post(ClientEvent event);

 private:
  void finalize_bounded() noexcept;

  std::string nspace_;
  bool relay_fences_ = false;
  // libpmix keeps pointing into it (the topology's copy): it goes after PMIx_server_finalize.
  InfoArray init_info_;
  UniqueFd events_fd_;
  std::mutex mutex_;
  std::vector<ClientEvent> queue_;
  std::set<std::uint32_t> connected_;  // ranks that connected, and those that finalized
  std::set<std::uint32_t> finalized_;
};

}  // namespace hyrun::pmix
