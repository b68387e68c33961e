#pragma once
// hyrun's PMIx client of the launch above it (srun's or mpirun's server), kept in a helper
// process so that hyrun itself may serve PMIx to its ranks: libpmix holds one identity per
// process, and a process that is a client cannot start a server too (docs/pmix.md).
//
// Contract:
//  - connect() forks the helper before this process touches libpmix; the helper runs a
//    pmix::Client (client.hpp) and answers one request at a time over a socket pair. Every
//    call has pmix::Client's contract: the same limits, TimeoutError (124) past them, Error
//    with the PMIx status otherwise.
//  - The helper ignores the job's signals (hyrun decides what they mean) and ends when this
//    object is destroyed (after PMIx_Finalize, waited for at most 5 s) or when this process
//    dies (PR_SET_PDEATHSIG). A helper that is gone makes every call throw hyrun::Error.
//  - After connect() this process's environment holds no PMIX_* variable: they were the
//    outer server's, for the helper, and must not reach hyrun's own server or its ranks.
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hyrun/common/error.hpp"
#include "hyrun/common/unique_fd.hpp"
#include "hyrun/pmix/client_api.hpp"

namespace hyrun::pmix {

class ClientProcess final : public ClientApi {
 public:
  /// Starts the helper and connects it (PMIx_Init), waiting at most `init_limit` (hyrun's
  /// --bootstrap-timeout: on a machine that starts hundreds of nodes at once the server may
  /// take its time) and looking at `stop` every 20 ms. nullopt when no PMIx server started
  /// this process (as pmix::Client::connect). Throws TimeoutError past the limit, Stopped
  /// when `stop` said so, hyrun::Error on any other failure.
  static std::optional<ClientProcess> connect(std::chrono::milliseconds init_limit, const std::function<bool()>& stop);
  /// connect() gave up because `stop` said so (a signal asked hyrun to end).
  struct Stopped : Error {
    using Error::Error;
  };

  ~ClientProcess() override;  ///< finish(5 s) if not finished

  /// Ends the helper, which says PMIx_Finalize to the server, and waits for its end at most
  /// `limit` (at least 5 s), or 5 s more once `stop` says so (a signal asked hyrun to end); past
  /// that it kills the helper, and the server sees a client end without finalizing. A server
  /// busy with hundreds of nodes ending at once may take longer than 5 s (512 x 4 simulated
  /// nodes on 2 cores), so hyrun gives its PMIx_Finalize what its PMIx_Init had.
  void finish(std::chrono::milliseconds limit, const std::function<bool()>& stop) noexcept;
  ClientProcess(ClientProcess&& other) noexcept = default;
  ClientProcess& operator=(ClientProcess&& other) noexcept;
  ClientProcess(const ClientProcess&) = delete;
  ClientProcess& operator=(const ClientProcess&) = delete;

  /// The helper's pid (a child of this process).
  pid_t pid() const { return pid_; }
  /// Each task's host as the server says (PMIX_HOSTNAME of each process); empty where it
  /// does not say.
  const std::vector<std::string>& task_hosts() const { return task_hosts_; }

  void put(const std::string& key, std::span<const std::byte> value) override;
  void commit() override;
  bool fence(std::chrono::milliseconds timeout, const std::function<bool()>& stop = {}) override;
  std::vector<std::byte> get(int rank, const std::string& key, std::chrono::milliseconds timeout) override;
  std::optional<std::vector<std::vector<std::byte>>> get_many(const std::vector<Wanted>& wanted,
                                                              std::chrono::milliseconds timeout,
                                                              const std::function<bool()>& stop = {}) override;
  /// An allgather among the job's processes in one collect-data fence with no limit: this
  /// process's `value` goes under `key` (in pieces of at most kAllgatherPiece bytes, so that
  /// no PMIx server meets a large put), then the helper fences and sends every process's
  /// value back, in rank order, as messages on fd(): read each with read_allgather() when
  /// fd() is readable. Each get of a collected value may take connect()'s `init_limit`. One allgather at a time; no
  /// other call while one is open but abort() (which cancels it) and the end of this object. Throws Error as put()
  /// does.
  void start_allgather(const std::string& key, std::span<const std::byte> value);
  /// A piece travels as hex in one message on the socket pair, whose messages the kernel
  /// bounds by the send buffer (net.core.wmem_default, 208 KiB on Debian 12).
  static constexpr std::size_t kAllgatherPiece = std::size_t{64} << 10;
  /// One message of the open allgather: a piece of `rank`'s value (every piece of rank r
  /// comes before rank r + 1's), or nullopt for the end, after every rank's last piece.
  /// Throws Error with what the helper met (a failed fence), or when it ended.
  struct AllgatherPiece {
    int rank = 0;
    std::vector<std::byte> bytes;
  };
  std::optional<AllgatherPiece> read_allgather();
  /// The helper's socket: readable when read_allgather() has a message.
  int fd() const { return socket_.get(); }

  /// PMIx_Abort of the whole job through the helper, then this process exits as
  /// pmix::Client::abort does (never 0).
  [[noreturn]] void abort(int status, const std::string& message) override;

 private:
  ClientProcess() = default;

  UniqueFd socket_;
  pid_t pid_ = -1;
  std::chrono::milliseconds op_limit_{0};  // connect()'s init_limit: also each get of an allgather's values
  std::vector<std::string> task_hosts_;
};

}  // namespace hyrun::pmix
