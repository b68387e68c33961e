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
#include <optional>
#include <string>

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
  [[noreturn]] void abort(int status, const std::string& message) override;

 private:
  Client() = default;
  void finalize() noexcept;

  bool connected_ = false;
};

}  // namespace hyrun::pmix
