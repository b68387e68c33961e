#pragma once
// The environment contract between a hyrun parent and the rank processes it starts.
// This header is the one definition of every variable name; docs/environment.md
// describes them for users.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hyrun {
namespace env {
inline constexpr const char* kRank = "HYRUN_RANK";                                ///< global rank, 0..world-1
inline constexpr const char* kWorldSize = "HYRUN_WORLD_SIZE";                     ///< number of ranks in the job
inline constexpr const char* kLocalRank = "HYRUN_LOCAL_RANK";                     ///< rank among this parent's ranks
inline constexpr const char* kLocalWorldSize = "HYRUN_LOCAL_WORLD_SIZE";          ///< ranks this parent starts
inline constexpr const char* kNodeRank = "HYRUN_NODE_RANK";                       ///< index of this parent (0..nodes-1)
inline constexpr const char* kNumNodes = "HYRUN_NUM_NODES";                       ///< number of hyrun parents
inline constexpr const char* kRootAddress = "HYRUN_ROOT_ADDRESS";                 ///< rank 0's UCX worker address, hex
inline constexpr const char* kJobToken = "HYRUN_JOB_TOKEN";                       ///< random per-job secret
inline constexpr const char* kPublishFd = "HYRUN_PUBLISH_FD";                     ///< rank 0 only: fd to publish on
inline constexpr const char* kBootstrapTimeoutMs = "HYRUN_BOOTSTRAP_TIMEOUT_MS";  ///< time limit of joins
inline constexpr const char* kLogLevel = "HYRUN_LOG_LEVEL";              ///< spdlog level for hyrun and workers
inline constexpr const char* kControlFd = "HYRUN_CONTROL_FD";            ///< socket to tell hyrun of planned exits
inline constexpr const char* kIncarnation = "HYRUN_INCARNATION";         ///< 0, or how often hyrun restarted the rank
inline constexpr const char* kOutputTerminal = "HYRUN_OUTPUT_TERMINAL";  ///< "1": hyrun's own stdout is a terminal
inline constexpr const char* kStartRanks = "HYRUN_START_RANKS";          ///< "0,1,3": the ranks of the collective start
inline constexpr const char* kRootPending =
    "HYRUN_ROOT_PENDING";  ///< DIR: the rest comes there (pending_environment.hpp)
// The names other frameworks read (torchrun, NCCL-style programs).
inline constexpr const char* kCommonRank = "RANK";
inline constexpr const char* kCommonWorldSize = "WORLD_SIZE";
inline constexpr const char* kCommonLocalRank = "LOCAL_RANK";
inline constexpr const char* kCommonLocalWorldSize = "LOCAL_WORLD_SIZE";
// The rest of what torchrun gives its workers, so that torch.distributed (env://) and
// frameworks that detect torchrun by TORCHELASTIC_RUN_ID run unchanged under hyrun.
inline constexpr const char* kGroupRank = "GROUP_RANK";                     ///< = HYRUN_NODE_RANK
inline constexpr const char* kGroupWorldSize = "GROUP_WORLD_SIZE";          ///< = HYRUN_NUM_NODES
inline constexpr const char* kRoleRank = "ROLE_RANK";                       ///< = RANK (one role)
inline constexpr const char* kRoleWorldSize = "ROLE_WORLD_SIZE";            ///< = WORLD_SIZE
inline constexpr const char* kRoleName = "ROLE_NAME";                       ///< "default", as torchrun's
inline constexpr const char* kRestartCount = "TORCHELASTIC_RESTART_COUNT";  ///< = HYRUN_INCARNATION
inline constexpr const char* kMaxRestarts = "TORCHELASTIC_MAX_RESTARTS";    ///< 0: hyrun never restarts a job
// Defaults: set only when neither hyrun's environment nor -x has them (the user's win).
inline constexpr const char* kMasterAddr = "MASTER_ADDR";         ///< root node's address, reachable from all
inline constexpr const char* kMasterPort = "MASTER_PORT";         ///< a port that was free on the root node
inline constexpr const char* kRunId = "TORCHELASTIC_RUN_ID";      ///< one id per job
inline constexpr const char* kOmpNumThreads = "OMP_NUM_THREADS";  ///< CPUs of the rank's binding
// Settings a user gives hyrun or the EP tools; not part of what a rank is given.
/// Prefix of hyrun's own value of a variable that it rewrites for each rank (srun's
/// SLURM_PROCID, mpirun's OMPI_COMM_WORLD_RANK, ...): HYRUN_OUTER_SLURM_PROCID.
inline constexpr const char* kOuterPrefix = "HYRUN_OUTER_";
inline constexpr const char* kTopologyCache = "HYRUN_TOPOLOGY_CACHE";  ///< hyrun's topology cache: DIR or "off"
inline constexpr const char* kEpBench = "HYRUN_EP_BENCH";              ///< the ep-bench program ep-elastic starts
inline constexpr const char* kEpToken = "HYRUN_EP_TOKEN";  ///< ep-elastic's job token, instead of its token file
}  // namespace env

/// What a rank learns from its parent. Parents build it, format it with
/// to_variables(); ranks read it back with from_environment().
struct RankEnvironment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  int num_nodes = 1;
  std::string job_token;
  std::optional<std::string> root_address_hex;  ///< absent for rank 0 and for --bootstrap=none
  std::optional<int> publish_fd;                ///< present for rank 0 only
  int bootstrap_timeout_ms = 60000;
  int incarnation = 0;  ///< restarts of this rank by hyrun
  /// hyrun's own stdout is a terminal: a rank's stdout is a pipe to hyrun, which forwards
  /// whole lines, so a rank may show progress as lines where it would not on a pipe.
  bool output_terminal = false;
  std::optional<int> control_fd;  ///< hyrun's control channel, when given
  /// The ranks that take part in the World's collective start, ascending; empty = all of
  /// them. The others join the running World later, as restarted ranks do (elastic jobs
  /// whose ranks start when the program needs them, or in another launch).
  std::vector<int> start_ranks;
  /// True when this rank joins the running World instead of taking part in its start.
  bool joins_late() const;
  // Rendezvous defaults for programs with their own bootstrap (torch.distributed env://).
  std::string master_addr;  ///< "" = not set
  std::optional<int> master_port;
  std::string run_id;  ///< "" = not set
  /// Not empty: the rank was started before rank 0's address (and, on another node, the
  /// job's token and rendezvous) were known; they come in this directory
  /// (pending_environment.hpp), and job_token / root_address_hex are empty until then.
  std::string root_pending_dir;

  /// NAME=value pairs for every variable of the contract, the common aliases included.
  /// They describe this rank and replace any inherited value.
  std::vector<std::pair<std::string, std::string>> to_variables() const;
  /// NAME=value pairs of the rendezvous defaults (MASTER_ADDR, MASTER_PORT,
  /// TORCHELASTIC_RUN_ID): a value the user set in the environment or with -x wins.
  std::vector<std::pair<std::string, std::string>> default_variables() const;

  /// Field by field (the rendezvous defaults too).
  bool operator==(const RankEnvironment&) const = default;

  /// Reads the contract from this process's environment. Throws Error with
  /// "not started by hyrun: HYRUN_RANK is not set" when the contract is absent,
  /// and UsageError naming the variable when a value is malformed or inconsistent.
  static RankEnvironment from_environment();
};

/// The line rank 0 writes on its publish fd: "hyrun-root v1 <hex address>\n".
std::string format_publish_line(const std::string& address_hex);

/// Parses one publish line (without its newline); std::nullopt if it is not one.
std::optional<std::string> parse_publish_line(const std::string& line);

/// The line the worker library writes on the publish fd as soon as it is loaded (or a
/// World starts), before the address: "hyrun-hello v1\n". It tells hyrun that rank 0
/// uses the worker library, so that a program that does not is named within seconds.
std::string format_hello_line();
/// True for a hello line (without its newline).
bool is_hello_line(const std::string& line);

}  // namespace hyrun
