#include "hyrun/pmix/server.hpp"

#include <fmt/format.h>
#include <pmix_server.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/select.h>

#include <unistd.h>
#include <cstdlib>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <future>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include "hyrun/common/error.hpp"
#include "hyrun/pmix/completion.hpp"
#include "hyrun/pmix/status.hpp"

namespace hyrun::pmix {
namespace {

// libpmix's own work (registering a namespace or a client) needs no other process: a limit
// only guards against a library that never calls back.
constexpr auto kLocalWorkLimit = std::chrono::seconds(30);
// How long the end of the job waits for libpmix's thread before it leaves without it.
constexpr auto kFinalizeLimit = std::chrono::seconds(5);

// Info arrays of a server whose finalize did not return: libpmix may still read them.
std::vector<InfoArray>& abandoned_info() {
  static std::vector<InfoArray> arrays;
  return arrays;
}

// The one server of this process (server.hpp); libpmix's fence upcall carries no server object.
// libpmix may outlive it: ~Server leaves the library running when its finalize would crash or
// does not return, and clients still come, finalize and abort. So every upcall uses the server
// only while it holds the gate, and ~Server takes the gate to say it is gone: no upcall then
// touches its memory (a freed Server's queue written from libpmix's thread corrupted the heap).
std::atomic<Server*> the_server{nullptr};
std::shared_mutex& gate() {
  static std::shared_mutex mutex;
  return mutex;
}

// Posts `event` to the server if there still is one.
void post_to_server(ClientEvent event) {
  std::shared_lock lock(gate());
  if (Server* server = the_server.load()) server->post(std::move(event));
}

// The upcalls, on libpmix's progress thread: queue, wake, return. PMIX_OPERATION_SUCCEEDED
// says the request is done and no callback will come.
// A client registered without the server object (none is: register_job gives every rank
// one) is not the job's: its events are dropped, as before.
pmix_status_t on_connected(const pmix_proc_t* proc, void* server_object, pmix_op_cbfunc_t, void*) {
  if (server_object != nullptr) post_to_server({ClientEvent::Kind::kConnected, proc->rank, 0, {}, {}, {}, 0});
  return PMIX_OPERATION_SUCCEEDED;
}

pmix_status_t on_finalized(const pmix_proc_t* proc, void* server_object, pmix_op_cbfunc_t, void*) {
  if (server_object != nullptr) post_to_server({ClientEvent::Kind::kFinalized, proc->rank, 0, {}, {}, {}, 0});
  return PMIX_OPERATION_SUCCEEDED;
}

pmix_status_t on_abort(const pmix_proc_t* proc, void* server_object, int status, const char message[], pmix_proc_t*,
                       size_t, pmix_op_cbfunc_t cbfunc, void* cbdata) {
  std::shared_lock lock(gate());
  Server* server = the_server.load();
  if (server_object == nullptr || server == nullptr) return PMIX_ERR_NOT_SUPPORTED;  // no callback comes
  ClientEvent event{ClientEvent::Kind::kAborted, proc->rank, status, message != nullptr ? message : "", {}, {}, 0};
  // The client is released when hyrun has read the event: its end comes after.
  if (cbfunc != nullptr)
    event.hold = std::shared_ptr<void>(cbdata, [cbfunc](void* data) { cbfunc(PMIX_SUCCESS, data); });
  server->post(std::move(event));
  return PMIX_SUCCESS;
}

void release_bytes(void* release) { std::unique_ptr<std::string>(static_cast<std::string*>(release)); }

// Completes a fence with `all`: the copy lives until libpmix releases it.
void complete_fence(pmix_modex_cbfunc_t cbfunc, void* cbdata, pmix_status_t status, std::string all) {
  auto* bytes = std::make_unique<std::string>(std::move(all)).release();  // owned by the release callback
  cbfunc(status, bytes->data(), bytes->size(), cbdata, release_bytes, bytes);
}

bool whole_job(const Server& server, const pmix_proc_t* procs, size_t nprocs) {
  return nprocs == 1 && procs[0].rank == PMIX_RANK_WILDCARD &&
         PMIX_CHECK_NSPACE(procs[0].nspace, server.nspace().c_str());
}

// What a client is told of a request that other nodes answered.
pmix_status_t status_of(PendingRequest::Outcome outcome, pmix_status_t failed) {
  switch (outcome) {
    case PendingRequest::Outcome::kDone: return PMIX_SUCCESS;
    case PendingRequest::Outcome::kTooLarge: return PMIX_ERR_OUT_OF_RESOURCE;
    case PendingRequest::Outcome::kFailed: break;
  }
  return failed;
}

// A fence of the job's ranks. With every rank on this node, the data collected is the data
// given. libpmix completes such fences by itself, but not all: when a participant's
// connection ends, libpmix 4.2.2 hands the fence to the host without checking that the host
// has a fence function (a crash without one, seen when a rank exited without MPI_Finalize).
// Completed here at once: libpmix's callback moves the work to its own thread, and nothing
// of hyrun's (its loop may be over) must hold the fence. A job across nodes hands the fence
// to hyrun's loop (kFence), which completes it with every node's part.
pmix_status_t on_fence(const pmix_proc_t* procs, size_t nprocs, const pmix_info_t*, size_t, char* data, size_t size,
                       pmix_modex_cbfunc_t cbfunc, void* cbdata) {
  if (cbfunc == nullptr) return PMIX_ERR_NOT_SUPPORTED;
  std::string part(data != nullptr ? data : "", data != nullptr ? size : 0);
  std::shared_lock lock(gate());
  Server* server = the_server.load();
  if (server == nullptr) {  // the job ends: its server is going
    complete_fence(cbfunc, cbdata, PMIX_ERR_LOST_CONNECTION, std::move(part));
    return PMIX_SUCCESS;
  }
  if (!server->relays_fences()) {
    complete_fence(cbfunc, cbdata, PMIX_SUCCESS, std::move(part));
    return PMIX_SUCCESS;
  }
  if (!whole_job(*server, procs, nprocs)) return PMIX_ERR_NOT_SUPPORTED;  // docs/pmix.md, Not served
  ClientEvent event;
  event.kind = ClientEvent::Kind::kFence;
  event.request = std::make_shared<PendingRequest>(
      std::move(part), [cbfunc, cbdata](PendingRequest::Outcome outcome, std::string all) {
        complete_fence(cbfunc, cbdata, status_of(outcome, PMIX_ERR_LOST_CONNECTION), std::move(all));
      });
  server->post(std::move(event));
  return PMIX_SUCCESS;
}

// A client asks for data of a rank that is not on this node (direct modex: Open MPI with
// pmix_base_async_modex, or a PMIx_Get after a fence without PMIX_COLLECT_DATA): hyrun asks
// the node that holds it (pmix_relay.hpp).
pmix_status_t on_direct_modex(const pmix_proc_t* proc, const pmix_info_t*, size_t, pmix_modex_cbfunc_t cbfunc,
                              void* cbdata) {
  std::shared_lock lock(gate());
  Server* server = the_server.load();
  if (cbfunc == nullptr || server == nullptr || !server->relays_fences() ||
      !PMIX_CHECK_NSPACE(proc->nspace, server->nspace().c_str()))
    return PMIX_ERR_NOT_FOUND;
  ClientEvent event;
  event.kind = ClientEvent::Kind::kDirectModex;
  event.rank = proc->rank;
  event.request = std::make_shared<PendingRequest>(
      std::string(), [cbfunc, cbdata](PendingRequest::Outcome outcome, std::string data) {
        complete_fence(cbfunc, cbdata, status_of(outcome, PMIX_ERR_NOT_FOUND), std::move(data));
      });
  server->post(std::move(event));
  return PMIX_SUCCESS;
}

// serve_local_data's request, until libpmix answers it (to the server, if it is still there).
struct LocalDataRequest {
  std::uint32_t rank;
  std::uint64_t id;
};

void on_local_data(pmix_status_t status, char* data, size_t size, void* cbdata) {
  const std::unique_ptr<LocalDataRequest> request(static_cast<LocalDataRequest*>(cbdata));
  ClientEvent event;
  event.kind = ClientEvent::Kind::kLocalData;
  event.rank = request->rank;
  event.id = request->id;
  event.status = status == PMIX_SUCCESS ? 0 : 1;
  if (status == PMIX_SUCCESS && data != nullptr) event.message.assign(data, size);
  post_to_server(std::move(event));
}

pmix_server_module_t make_module() {
  pmix_server_module_t module{};
  module.client_connected = on_connected;
  module.client_finalized = on_finalized;
  module.abort = on_abort;
  module.fence_nb = on_fence;
  module.direct_modex = on_direct_modex;
  return module;
}

void wait_local(const std::shared_ptr<Completion>& done, const std::string& what) {
  const auto status = done->wait_until(std::chrono::steady_clock::now() + kLocalWorkLimit);
  if (!status)
    throw TimeoutError(fmt::format("{}: libpmix did not finish within {} s", what,
                                   std::chrono::duration_cast<std::chrono::seconds>(kLocalWorkLimit).count()));
  throw_if_failed(*status, what);
}

// libpmix 4.2.2's listener thread waits with select(), which takes only fds below FD_SETSIZE
// (1024): with those all open, glibc aborts hyrun in FD_SET ("bit out of range"). hyrun opens
// a few before this; the rest were inherited (they never reach the ranks). Checked before
// PMIx_server_init, which makes the listener's socket and pipe.
void check_fds_for_the_listener() {
  constexpr int kListenerFds = 16;  // its sockets and pipe, with room to spare
  int open_below = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", error)) {
    const std::string name = entry.path().filename().string();
    int fd = -1;
    if (std::from_chars(name.data(), name.data() + name.size(), fd).ec == std::errc{} && fd < FD_SETSIZE) ++open_below;
  }
  if (error) return;  // no /proc: libpmix finds out itself
  if (open_below + kListenerFds > FD_SETSIZE)
    throw Error(fmt::format(
        "{} of the {} file descriptors below {} are open (hyrun inherited most of them from the program that "
        "started it), and libpmix 4.2.2's server listens with select(), which takes only those: close them, or "
        "set close-on-exec on them, in that program",
        open_below, FD_SETSIZE, FD_SETSIZE));
}

}  // namespace

Server::Server(const std::string& rendezvous_dir, const NodeName& node, hwloc_topology_t topology)
    : events_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (!events_fd_) throw SystemError("PMIx server: eventfd", errno);
  check_fds_for_the_listener();
  // The hash data store, not libpmix 4.2.2's shared-memory stores (ds21, ds12): those keep a
  // rank's data in fixed segments, and a PMIx_Put of 4 MiB or more aborted hyrun in
  // pmix_common_dstor_store ("PLEASE set NS_DATA_SEG_SIZE", then free() of an invalid
  // pointer). MCA parameters come from the environment when libpmix initialises; the ranks
  // learn the server's store from its fork set-up (PMIX_GDS_MODULE), and hyrun's own PMIX_*
  // variables never reach them (rank_environment.hpp).
  ::setenv("PMIX_MCA_gds", "hash", 1);
  static pmix_server_module_t module = make_module();
  InfoList info;
  info.add(PMIX_SERVER_TMPDIR, rendezvous_dir);
  info.add(PMIX_SYSTEM_TMPDIR, rendezvous_dir);
  info.add(PMIX_SERVER_TOOL_SUPPORT, false);
  info.add(PMIX_HOSTNAME, node.host);
  info.add(PMIX_NODEID, node.id);
  pmix_topology_t shared{const_cast<char*>("hwloc"), topology};
  if (topology != nullptr) info.add_topology(PMIX_TOPOLOGY2, shared);
  init_info_ = info.to_array();
  throw_if_failed(PMIx_server_init(&module, init_info_.data(), init_info_.size()),
                  "PMIx_server_init (hyrun's PMIx server)");
  the_server.store(this);
}

Server::~Server() {
  {
    std::unique_lock lock(gate());  // waits for an upcall that is using this server
    the_server.store(nullptr);      // a fence from now on fails at once; no upcall touches this
  }
  bool lost_client = false;
  {
    std::lock_guard lock(mutex_);
    queue_.clear();  // releases a client held in PMIx_Abort before the library goes
    lost_client = connected_.size() != finalized_.size();
  }
  // libpmix 4.2.2's PMIx_server_finalize crashes now and then (1 run in 13 under gdb) when a
  // client was lost without finalizing while others waited in a fence: the process ends
  // soon after, and its directory is removed by its owner, so the library is left as it is.
  if (lost_client) {
    spdlog::debug("hyrun's PMIx server: a client ended without PMIx_Finalize; libpmix is not finalized");
    abandoned_info().push_back(std::move(init_info_));  // libpmix, still running, may read it
    return;
  }
  finalize_bounded();
}

// PMIx_server_finalize waits for libpmix's progress thread without a limit, and a client of
// this user can hold that thread (half a handshake): it runs on a thread of its own, waited
// for at most kFinalizeLimit.
void Server::finalize_bounded() noexcept {
  try {
    auto result = std::make_shared<std::promise<pmix_status_t>>();
    auto finalized = result->get_future();
    std::thread([result] { result->set_value(PMIx_server_finalize()); }).detach();
    if (finalized.wait_for(kFinalizeLimit) != std::future_status::ready) {
      spdlog::warn(
          "hyrun's PMIx server: PMIx_server_finalize did not return within {} s (a client holds libpmix); "
          "leaving it",
          std::chrono::duration_cast<std::chrono::seconds>(kFinalizeLimit).count());
      abandoned_info().push_back(std::move(init_info_));  // libpmix may still read it
      return;
    }
    if (const pmix_status_t rc = finalized.get(); rc != PMIX_SUCCESS)
      spdlog::warn("PMIx_server_finalize: {}", describe_status(rc));
  } catch (const std::exception& e) {
    spdlog::warn("hyrun's PMIx server: not finalized: {}", e.what());
  }
}

// Every registration is handed to libpmix's thread at once and awaited together: each wait
// is a hand-off to that thread, which on a busy node waits for a core (with a wait per rank,
// the `pmix server` step took 4 to 168 ms on the 16-node testbed). libpmix runs them in the
// order given, and a client may be registered before its namespace's registration ran.
void Server::register_job(const JobMap& map) {
  nspace_ = map.nspace;
  relay_fences_ = map.hosts.size() > 1;
  InfoArray info = namespace_info(map);  // read by libpmix until its callback: every wait below ends first
  pmix_nspace_t nspace;
  PMIX_LOAD_NSPACE(nspace, map.nspace.c_str());
  const auto& local = map.ranks.at(map.node);
  std::vector<std::pair<std::shared_ptr<Completion>, std::string>> queued;
  const auto await_queued = [&queued] {
    for (const auto& [done, what] : queued) wait_local(done, what);
  };
  const auto queue = [&](const std::string& what, const auto& call) {
    auto [done, cbdata] = Completion::make();
    if (const pmix_status_t rc = call(cbdata); rc != PMIX_SUCCESS) {
      Completion::release(cbdata);
      await_queued();
      throw_if_failed(rc, what);
    }
    queued.emplace_back(std::move(done), what);
  };
  queue(fmt::format("registering the PMIx namespace {}", map.nspace), [&](void* cbdata) {
    return PMIx_server_register_nspace(nspace, static_cast<int>(local.size()), info.data(), info.size(),
                                       Completion::on_operation, cbdata);
  });
  for (std::uint32_t rank : local) {
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, nspace, rank);
    queue(fmt::format("registering rank {} with hyrun's PMIx server", rank), [&](void* cbdata) {
      return PMIx_server_register_client(&proc, ::getuid(), ::getgid(), this, Completion::on_operation, cbdata);
    });
  }
  await_queued();
}

std::vector<std::pair<std::string, std::string>> Server::client_environment(std::uint32_t rank) const {
  pmix_proc_t proc;
  PMIX_LOAD_PROCID(&proc, nspace_.c_str(), rank);
  char** env = nullptr;
  const pmix_status_t rc = PMIx_server_setup_fork(&proc, &env);
  std::vector<std::pair<std::string, std::string>> out;
  for (char** e = env; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    if (const auto eq = entry.find('='); eq != std::string::npos)
      out.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
  }
  PMIX_ARGV_FREE(env);
  throw_if_failed(rc, fmt::format("preparing rank {}'s PMIx environment (PMIx_server_setup_fork)", rank));
  return out;
}

void Server::serve_local_data(std::uint32_t rank, std::uint64_t id) {
  pmix_proc_t proc;
  PMIX_LOAD_PROCID(&proc, nspace_.c_str(), rank);
  auto request = std::make_unique<LocalDataRequest>(LocalDataRequest{rank, id});
  if (const pmix_status_t rc = PMIx_server_dmodex_request(&proc, on_local_data, request.get()); rc != PMIX_SUCCESS) {
    spdlog::debug("PMIx_server_dmodex_request for rank {}: {}", rank, describe_status(rc));
    ClientEvent event;
    event.kind = ClientEvent::Kind::kLocalData;
    event.rank = rank;
    event.id = id;
    event.status = 1;
    post(std::move(event));
    return;
  }
  request.release();  // owned by on_local_data now
}

void Server::post(ClientEvent event) {
  {
    std::lock_guard lock(mutex_);
    if (event.kind == ClientEvent::Kind::kConnected) connected_.insert(event.rank);
    if (event.kind == ClientEvent::Kind::kFinalized) finalized_.insert(event.rank);
    queue_.push_back(std::move(event));
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(events_fd_.get(), &one, sizeof one);  // full only past 2^64 events
}

std::vector<ClientEvent> Server::take_events() {
  std::uint64_t count = 0;
  [[maybe_unused]] const ssize_t n = ::read(events_fd_.get(), &count, sizeof count);  // EAGAIN: none yet
  std::lock_guard lock(mutex_);
  return std::exchange(queue_, {});
}

}  // namespace hyrun::pmix
