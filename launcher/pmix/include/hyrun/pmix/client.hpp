#pragma once
// hyrun's PMIx client: this process as one member of a PMIx job (one hyrun per Slurm
// task under `srun --mpi=pmix`, or per process under Open MPI's mpirun).
//
// Contract:
//  - At most one Client exists in a process at a time (PMIx_Init/Finalize are
//    process-global). The Client owns the PMIx connection; its destructor calls
//    PMIx_Finalize on every path, including stack unwinding. Movable, not copyable.
//  - Every call has ClientApi's limits and errors (client_api.hpp).
//  - PMIx passes timeouts to the server in whole seconds (PMIX_TIMEOUT): a timeout in
//    milliseconds is rounded up for the server, and enforced to the millisecond here.
//  - Node ids are whatever the server reports: never assume they start at 0 (under
//    mpirun inside an allocation they start at 1).
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hyrun/pmix/client_api.hpp"

namespace hyrun::pmix {

class Client final : public ClientApi {
 public:
  /// Connects to the PMIx server of this process (PMIx_Init). Returns nullopt when the
  /// process was not started by a PMIx server: PMIx_Init then returns PMIX_ERR_UNREACH
  /// after initialising a singleton, which is finalised here. Throws hyrun::Error on any
  /// other failure.
  static std::optional<Client> connect();

  ~Client() override;  ///< PMIx_Finalize (no-op for a moved-from Client)
  Client(Client&& other) noexcept;
  Client& operator=(Client&& other) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// PMIX_HOSTNAME of process `rank` of the job, from what PMIx_Init delivered (never asks
  /// the server); nullopt when the server did not provide it.
  std::optional<std::string> hostname_of(int rank) const;

  void put(const std::string& key, std::span<const std::byte> value) override;
  void commit() override;
  bool fence(std::chrono::milliseconds timeout, const std::function<bool()>& stop = {}) override;
  std::vector<std::byte> get(int rank, const std::string& key, std::chrono::milliseconds timeout) override;
  std::optional<std::vector<std::vector<std::byte>>> get_many(const std::vector<Wanted>& wanted,
                                                              std::chrono::milliseconds timeout,
                                                              const std::function<bool()>& stop = {}) override;
  /// get_many(), each value handed to `take` as soon as it and those before it came (the
  /// helper sends each on at once). The next value's `timeout` starts when `take` returns.
  /// False when `stop` said so first.
  bool get_each(const std::vector<Wanted>& wanted, std::chrono::milliseconds timeout,
                const std::function<void(int rank, std::vector<std::byte> value)>& take,
                const std::function<bool()>& stop = {}) const;
  [[noreturn]] void abort(int status, const std::string& message) override;

 private:
  Client() = default;
  void finalize() noexcept;
  // A get asked for (PMIx_Get_nb) and not yet waited for.
  struct PendingGet;
  PendingGet start_get(int rank, const std::string& key, std::chrono::milliseconds timeout) const;
  // Its value, waiting until `deadline` (`timeout` is the limit it was asked with, for the
  // message); nullopt when `stop` said so first.
  std::optional<std::vector<std::byte>> finish_get(const PendingGet& get,
                                                   std::chrono::steady_clock::time_point deadline,
                                                   std::chrono::milliseconds timeout,
                                                   const std::function<bool()>& stop = {}) const;

  bool connected_ = false;
};

}  // namespace hyrun::pmix
