#pragma once
// hyrun's PMI-1 and PMI-2 server (docs/pmix.md, "PMI-1 and PMI-2 for MPICH"): what MPICH and
// its derivatives start from. Each rank process gets a socket of its own as PMI_FD, with
// PMI_RANK and PMI_SIZE, as hydra's proxy gives them; it answers the requests of pmi_wire.hpp
// on hyrun's loop, in PMI-1 until a rank's init asks for PMI-2. Puts of either go into one
// key-value space of the job; a barrier (PMI-2: a fence) completes when every rank of this
// node is in it and, across nodes, once the relay's fence (the same authenticated node link
// as PMIx fences) has brought every node's puts since the last one. PMI-2's node attributes
// are this node's own.
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "hyrun/common/job_layout.hpp"
#include "hyrun/common/unique_fd.hpp"
#include "hyrun/launcher/pmi_wire.hpp"
#include "hyrun/launcher/pmix_relay.hpp"
#include "hyrun/launcher/pmix_service.hpp"
#include "hyrun/launcher/rank_environment.hpp"
#include "hyrun/launcher/rank_service.hpp"
#include "hyrun/launcher/rank_supervisor.hpp"
#include "hyrun/process/poll_participant.hpp"

namespace hyrun {

class PmiService final : public UntimedParticipant, public RankService {
 public:
  /// The descriptor number a rank finds its PMI socket at (after the publish and control fds).
  static constexpr int kChildFd = 5;
  /// What every rank of this node may put in all, locally (the relay bounds a fence too).
  static constexpr std::size_t kMaxBytes = kMaxRelayedBytes;

  /// The service for task `task` of `layout`, the job's key-value space named `kvsname`.
  PmiService(JobLayout layout, int task, std::string kvsname);
  ~PmiService() override;
  PmiService(const PmiService&) = delete;
  PmiService& operator=(const PmiService&) = delete;

  /// A socket for a new process of `global_rank`: the end the child inherits at kChildFd.
  /// Throws SystemError when the system has none to give.
  std::shared_ptr<UniqueFd> open(int global_rank);
  /// PMI_FD, PMI_RANK and PMI_SIZE for `global_rank`.
  EnvironmentEntries rank_variables(int global_rank) const override;
  /// open()'s end, as kChildFd.
  std::optional<std::pair<std::shared_ptr<UniqueFd>, int>> rank_descriptor(int global_rank) override {
    return std::pair{open(global_rank), kChildFd};
  }
  /// MPICH's PMI_process_mapping of the layout ("(vector,(0,2,4))": from node 0, 2 nodes of
  /// 4 ranks), or "" when its nodes do not hold blocks of ranks in order.
  static std::string process_mapping(const JobLayout& layout);

  void attach(RankSupervisor& supervisor);
  /// Barriers across nodes from now on go through `relay`; one already waiting goes now.
  void relay_to(CrossNodeRequests& relay);

  void add_poll_fds(std::vector<pollfd>& fds) override;
  bool on_poll(const pollfd& p) override;
  void settle() override;

 private:
  struct Connection {
    int rank = 0;
    UniqueFd fd;
    std::string in, out;
    int version = 1;  // 2 once its init asked for PMI-2
    bool in_barrier = false;
    std::string fence_thrid, attr_thrid;      // PMI-2: the requesters of a held fence and node attribute
    std::optional<std::string> awaited_attr;  // PMI-2: the node attribute it waits for
  };
  void read_from(Connection& c);
  void take_requests(Connection& c);
  // The parsed request, or nullopt after closing the rank's socket with why it is not one.
  std::optional<PmiRequest> taken(Connection& c, std::variant<PmiRequest, std::string> parsed,
                                  std::string_view protocol, std::string_view text);
  void handle(Connection& c, const PmiRequest& request);
  void handle2(Connection& c, const PmiRequest& request);
  void put(Connection& c, const PmiRequest& request);
  void get(Connection& c, const PmiRequest& request);
  // Keeps a put of either version; says why when it is refused.
  std::string store(std::string_view key, std::string_view value, int rank);
  void node_attribute(Connection& c, const PmiRequest& request);
  void reply2(Connection& c, const PmiRequest& request, std::string_view command,
              std::vector<std::pair<std::string_view, std::string_view>> fields);
  void barrier_in(Connection& c);
  void relay_barrier();
  void end_barrier(bool ok, std::string_view joined);
  void reply(Connection& c, std::string line);
  void flush(Connection& c);
  void close(Connection& c, const std::string& why);

  const JobLayout layout_;
  const int task_;
  const std::string kvsname_;
  const std::string mapping_;
  std::vector<std::unique_ptr<Connection>> connections_;
  std::map<std::string, std::string, std::less<>> values_;
  std::map<std::string, std::string, std::less<>> node_attributes_;  // PMI-2's, this node's
  std::size_t bytes_ = 0;
  std::string part_;  // this node's puts since the last barrier, "key=value\n" each
  bool barrier_waits_for_relay_ = false;
  RankSupervisor* supervisor_ = nullptr;
  CrossNodeRequests* relay_ = nullptr;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // a relayed barrier's answer checks it
};

}  // namespace hyrun
