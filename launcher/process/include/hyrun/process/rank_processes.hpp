#pragma once
// The rank processes of one launcher, as mechanics: starting each with its output pipes,
// control socket and (rank 0) publish pipe, reaping them (stops and continues too), and
// signalling their process groups. It judges nothing: what an end means for the job is the
// launcher's policy (hyrun/launcher/job_policy.hpp). Nothing outlives it: the destructor
// kills every rank's process group and reaps what is left.
#include <poll.h>
#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hyrun/common/planned_exit.hpp"
#include "hyrun/process/control_channel.hpp"
#include "hyrun/process/input_forwarder.hpp"
#include "hyrun/process/output_forwarder.hpp"
#include "hyrun/process/process_group.hpp"
#include "hyrun/process/publish_channel.hpp"
#include "hyrun/process/wait_status.hpp"

#include "hyrun/common/unique_fd.hpp"

namespace hyrun {

/// One rank to start.
struct RankLaunch {
  int global_rank = 0;
  int local_rank = 0;
  std::vector<std::string> environment;             ///< complete, as NAME=value
  bool publishes_address = false;                   ///< rank 0 under --bootstrap=ucx: gets the publish fd
  std::function<int(char*, std::size_t)> pre_exec;  ///< binding, applied in the child
  int incarnation = 0;                              ///< restarts of this rank so far
  std::string own_pid_variable;                     ///< set to the process's pid (SpawnSpec)
  /// More descriptors the child inherits, at the numbers given (the PMI socket); the parent's
  /// copies close when the last holder lets go.
  std::vector<std::pair<std::shared_ptr<UniqueFd>, int>> inherited_fds;
};

/// Where a rank process is in its life.
enum class ProcessState {
  kRunning,
  kSuspended,  ///< stopped by a signal (WIFSTOPPED) until its SIGCONT
  kEnded,
};

/// One process of a rank (a restarted rank has several, the latest last) and what it said
/// on its control socket.
struct RankProcess {
  int global_rank = 0;
  int local_rank = 0;
  pid_t pid = 0;
  ProcessGroup group;  // signalled only while known to be this rank's
  int incarnation = 0;
  ControlChannel control;
  ProcessState state = ProcessState::kRunning;
  ProcessEnd end{};                    // once kEnded
  std::optional<PlannedExit> planned;  // the end it announced, if any (a later one replaces it)
  bool handles_deaths = false;         // it asked to be told of other ranks' deaths
  // It connected to hyrun's PMIx or PMI-1 server (PMIx_Init or PMI_Init, as MPI_Init does)
  // and said goodbye (PMIx_Finalize, PMI_Finalize): a client that exits 0 without it failed.
  bool pmix_connected = false;
  bool pmix_finalized = false;
  const char* client_api = "PMIx";  // which of the two, for messages
  bool alive() const { return state != ProcessState::kEnded; }
};

/// What a reap found of one rank process.
struct ProcessEvent {
  enum class Kind { kStopped, kEnded };
  std::size_t process = 0;  ///< index into RankProcesses::all()
  Kind kind = Kind::kEnded;
  int status = 0;  ///< the wait status (kEnded), or the signal that stopped it (kStopped)
};

class RankProcesses {
 public:
  /// The fd number rank 0 finds its publish pipe at (HYRUN_PUBLISH_FD).
  static constexpr int kPublishFd = PublishChannel::kChildFd;
  /// The fd number every rank finds its control socket at (HYRUN_CONTROL_FD).
  static constexpr int kControlFd = ControlChannel::kChildFd;

  /// `command` runs in every rank; the output options are OutputForwarder's. From now on
  /// the launcher's own job events go through the same non-blocking stderr queue as the
  /// ranks' lines (hyrun/process/job_events.hpp).
  RankProcesses(std::vector<std::string> command, bool label, bool timestamp_output, std::string output_filename);
  /// Kills every rank's process group, waits for every rank process and reaps every other
  /// child; never throws (a failure is logged). Job events go to stdio again.
  ~RankProcesses();
  RankProcesses(const RankProcesses&) = delete;
  RankProcesses& operator=(const RankProcesses&) = delete;

  /// Starts `launch` as a new process in its own group; returns its index in all(). Only
  /// rank 0's first process reads the launcher's stdin. Throws SpawnError (the program
  /// cannot start) or SystemError (no pipe, no socket).
  std::size_t start(RankLaunch launch);

  /// Reaps every child that changed state, without waiting. A rank process that stopped is
  /// kSuspended, one that continued kRunning again (said in the log); one that ended is
  /// reported, but stays alive until record_end(). Other children (orphans adopted as
  /// subreaper) are reaped and forgotten.
  std::vector<ProcessEvent> reap();
  /// Marks `process` ended with `wait_status`.
  void record_end(std::size_t process, int wait_status);

  /// Sends `signal` to the group of every rank process not ended; a SIGCONT follows every
  /// signal but SIGUSR1/SIGUSR2 (a stopped rank acts on it only once continued).
  void signal_running(int signal);
  /// SIGKILL to every rank's group, also of ranks that ended (their own children go too).
  void kill_all_groups();

  /// Rank processes not ended (running or suspended).
  int running_count() const;
  std::vector<RankProcess>& all() { return processes_; }
  const std::vector<RankProcess>& all() const { return processes_; }
  /// The latest process of `global_rank`, or nullptr.
  RankProcess* latest(int global_rank);
  const RankProcess* latest(int global_rank) const;

  /// The output and input descriptors to poll; on_poll() handles them (true when it did).
  void add_poll_fds(std::vector<pollfd>& fds);
  bool on_poll(const pollfd& p);

  OutputForwarder& output() { return output_; }
  PublishChannel& publish() { return publish_; }

 private:
  const std::vector<std::string> command_;
  OutputForwarder output_;
  InputForwarder input_;
  PublishChannel publish_;
  std::vector<RankProcess> processes_;
};

}  // namespace hyrun
