#pragma once
// hyrun's PMIx client: this process as one member of a PMIx job (one hyrun per Slurm
// task under `srun --mpi=pmix`, or per process under Open MPI's mpirun).
//
// Contract:
//  - At most one Client exists in a process at a time (PMIx_Init/Finalize are
//    process-global). The Client owns the PMIx connection; its destructor calls
//    PMIx_Finalize on every path, including stack unwinding. Movable, not copyable.
//  - Every call that waits on other processes (fence, get) has a time limit and throws
//    hyrun::TimeoutError (exit code 124) naming what it waited for and for how long;
//    other PMIx failures throw hyrun::Error with the PMIx status name.
//  - PMIx passes timeouts to the server in whole seconds (PMIX_TIMEOUT): a timeout in
//    milliseconds is rounded up for the server, and enforced to the millisecond here.
//  - Node ids are whatever the server reports: never assume they start at 0 (under
//    mpirun inside an allocation they start at 1).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace hyrun::pmix {

class Client {
 public:
  /// Connects to the PMIx server of this process (PMIx_Init). Returns nullopt when the
  /// process was not started by a PMIx server: PMIx_Init then returns PMIX_ERR_UNREACH
  /// after initialising a singleton, which is finalised here. Throws hyrun::Error on any
  /// other failure.
  static std::optional<Client> connect();

  ~Client();  ///< PMIx_Finalize (no-op for a moved-from Client)
  Client(Client&& other) noexcept;
  Client& operator=(Client&& other) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  int rank() const { return rank_; }                     ///< rank in the PMIx job
  int job_size() const { return job_size_; }             ///< PMIX_JOB_SIZE
  const std::string& nspace() const { return nspace_; }  ///< PMIx namespace of the job

  /// Name of this process's node: PMIX_HOSTNAME, else SLURMD_NODENAME, else (and with
  /// a warning) gethostname(), which is the same for every simulated node of a test cluster.
  std::string hostname() const { return hostname_; }
  /// PMIX_NODEID of this process, when the server provides it (Slurm 22.05: 0-based;
  /// mpirun: from 0 or 1 depending on where mpirun itself runs).
  std::optional<std::uint32_t> node_id() const { return node_id_; }
  /// PMIX_LOCAL_RANK / PMIX_LOCAL_SIZE: this process among the job's processes on its node
  /// (0 / 1 when the server does not say).
  int local_rank_on_node() const { return local_rank_; }
  int local_size_on_node() const { return local_size_; }
  /// PMIX_HOSTNAME of process `rank` of the job, from what PMIx_Init delivered (never asks
  /// the server); nullopt when the server did not provide it.
  std::optional<std::string> hostname_of(int rank) const;

  /// One line for logs: "node n3 (slurm job 12 step 0, rank 2 of 4)" or, outside Slurm,
  /// "node h1 (pmix nspace prterun-h1-123@1, rank 2 of 4)".
  std::string describe() const;

  /// Publishes `value` under `key` for every process of the job (PMIX_GLOBAL, byte object).
  /// Visible to others after commit() and a fence().
  void put(const std::string& key, std::span<const std::byte> value);
  /// Pushes the values put so far to the server.
  void commit();
  /// Barrier over the whole job that also collects every process's committed data
  /// (PMIX_COLLECT_DATA). Throws TimeoutError if not every process arrives in `timeout`.
  /// Returns false at once, without completing, when `stop` (checked every 20 ms) returns
  /// true: hyrun must honour a signal while it waits for other nodes.
  bool fence(std::chrono::milliseconds timeout, const std::function<bool()>& stop = {});
  /// The bytes `rank` put under `key`. Waits up to `timeout` for them to exist (PMIx
  /// allows getting a key before it is fenced); throws TimeoutError after that, and
  /// hyrun::Error when the value exists but is not a byte object or string.
  std::vector<std::byte> get(int rank, const std::string& key, std::chrono::milliseconds timeout);

  /// Asks the server to kill every process of the job (PMIx_Abort on the whole namespace)
  /// with `status`, then exits this process with `status` (1 if `status` is 0) without
  /// returning, in case the server does not kill it.
  [[noreturn]] void abort(int status, const std::string& message);

 private:
  Client() = default;
  void finalize() noexcept;

  bool connected_ = false;
  std::string nspace_;
  int rank_ = 0;
  int job_size_ = 1;
  std::string hostname_;
  std::optional<std::uint32_t> node_id_;
  int local_rank_ = 0;
  int local_size_ = 1;
};

}  // namespace hyrun::pmix
