#pragma once
// The one declaration of hyrun's calls on the PMIx job above it (srun's or mpirun's server):
// pmix::Client makes them on the PMIx connection itself, in the helper process (client.hpp),
// and pmix::ClientProcess, hyrun's end of that helper, forwards them (client_process.hpp).
// A new call is declared here once, and each side implements it.
//
// Contract, for both: every call that waits on other processes (fence, get) has a time limit
// and throws hyrun::TimeoutError (exit code 124) naming what it waited for and for how long;
// other PMIx failures throw hyrun::Error with the PMIx status name.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace hyrun::pmix {

/// This process as its PMIx server described it at PMIx_Init.
struct ClientIdentity {
  int rank = 0;        ///< rank in the PMIx job
  int job_size = 1;    ///< PMIX_JOB_SIZE
  std::string nspace;  ///< PMIx namespace of the job
  /// Name of this process's node: PMIX_HOSTNAME, else SLURMD_NODENAME, else (and with a
  /// warning) gethostname(), which is the same for every simulated node of a test cluster.
  std::string hostname;
  /// PMIX_NODEID, when the server provides it (Slurm 22.05: 0-based; mpirun: from 0 or 1
  /// depending on where mpirun itself runs). Never assume node ids start at 0.
  std::optional<std::uint32_t> node_id;
  /// PMIX_LOCAL_RANK / PMIX_LOCAL_SIZE: this process among the job's processes on its node
  /// (0 / 1 when the server does not say).
  int local_rank = 0;
  int local_size = 1;
  /// One line for logs: "node n3 (slurm job 12 step 0, rank 2 of 4)" or, outside Slurm,
  /// "node h1 (pmix nspace prterun-h1-123@1, rank 2 of 4)".
  std::string description;
};

/// A fence's timeout that is no limit: the fence waits until every process arrives or `stop`
/// says so (the relay's fences last as long as every node is alive: the node link judges that).
inline constexpr std::chrono::milliseconds kNoLimit = std::chrono::milliseconds::max();

class ClientApi {
 public:
  virtual ~ClientApi() = default;

  const ClientIdentity& identity() const { return identity_; }
  int rank() const { return identity_.rank; }
  int job_size() const { return identity_.job_size; }
  const std::string& nspace() const { return identity_.nspace; }
  const std::string& hostname() const { return identity_.hostname; }
  std::optional<std::uint32_t> node_id() const { return identity_.node_id; }
  int local_rank_on_node() const { return identity_.local_rank; }
  int local_size_on_node() const { return identity_.local_size; }
  const std::string& describe() const { return identity_.description; }

  /// Publishes `value` under `key` for every process of the job (PMIX_GLOBAL, byte object).
  /// Visible to others after commit() and a fence().
  virtual void put(const std::string& key, std::span<const std::byte> value) = 0;
  /// Pushes the values put so far to the server.
  virtual void commit() = 0;
  /// Barrier over the whole job that also collects every process's committed data
  /// (PMIX_COLLECT_DATA). Throws TimeoutError if not every process arrives in `timeout`
  /// (kNoLimit: no limit, neither here nor in the server).
  /// Returns false at once, without completing, when `stop` (checked every 20 ms) returns
  /// true: hyrun must honour a signal while it waits for other nodes.
  virtual bool fence(std::chrono::milliseconds timeout, const std::function<bool()>& stop = {}) = 0;
  /// The bytes `rank` put under `key`. Waits up to `timeout` for them to exist (PMIx
  /// allows getting a key before it is fenced); throws TimeoutError after that, and
  /// hyrun::Error when the value exists but is not a byte object or string.
  virtual std::vector<std::byte> get(int rank, const std::string& key, std::chrono::milliseconds timeout) = 0;
  /// The values of `key` from ranks first_rank .. first_rank + ranks - 1 (get_many()).
  struct Wanted {
    std::string key;
    int first_rank = 0;
    int ranks = 1;
  };
  /// The bytes of every value `wanted` names, in that order. The gets are asked all at once,
  /// so that reading one value of each of N processes costs about one wait, not N round trips
  /// one after the other. Each value may take up to `timeout` after the one before it came (as
  /// get() called for each in turn would); the errors are get()'s, naming the rank. nullopt at
  /// once when `stop` (checked every 20 ms) returns true: hyrun must honour a signal meanwhile.
  virtual std::optional<std::vector<std::vector<std::byte>>> get_many(const std::vector<Wanted>& wanted,
                                                                      std::chrono::milliseconds timeout,
                                                                      const std::function<bool()>& stop = {}) = 0;
  /// Asks the server to kill every process of the job (PMIx_Abort on the whole namespace)
  /// with `status`, then exits this process with exit_code::of_failure_status(status) (never
  /// 0) without returning, in case the server does not kill it.
  [[noreturn]] virtual void abort(int status, const std::string& message) = 0;

 protected:
  ClientApi() = default;
  ClientApi(const ClientApi&) = default;
  ClientApi(ClientApi&&) noexcept = default;
  ClientApi& operator=(const ClientApi&) = default;
  ClientApi& operator=(ClientApi&&) noexcept = default;

  ClientIdentity identity_;
};

}  // namespace hyrun::pmix
