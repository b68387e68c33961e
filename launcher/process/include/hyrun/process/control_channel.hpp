#pragma once
// One rank's control socket (docs/architecture.md): datagrams both ways, each message
// whole. The rank says it handles peers' deaths, announces a planned exit, or (rank 0)
// asks hyrun to start a rank; hyrun tells it of deaths. hyrun's end never blocks.
#include <string>
#include <variant>
#include <vector>

#include "hyrun/common/planned_exit.hpp"
#include "hyrun/process/unique_fd.hpp"

namespace hyrun {

/// What a rank can say on its control socket.
namespace control {
struct HandlesDeaths {};  ///< "handles-deaths v1": tell me of other ranks' deaths
struct StartRank {        ///< a start-rank request (only rank 0 may make it)
  int global_rank = 0;
};
struct Unknown {  ///< anything else, kept for the warning (at most 256 bytes)
  std::string text;
};
using Message = std::variant<HandlesDeaths, StartRank, PlannedExit, Unknown>;
}  // namespace control

class ControlChannel {
 public:
  /// The fd number every rank finds its end at (HYRUN_CONTROL_FD).
  static constexpr int kChildFd = 4;

  /// Opens a socket pair; returns the rank's end (to be placed at kChildFd). Throws
  /// SystemError.
  UniqueFd open();

  /// Our end while it is open (for poll), else -1.
  int fd() const { return ours_ ? ours_.get() : -1; }
  explicit operator bool() const { return static_cast<bool>(ours_); }

  /// Every message that is there now, in order. Closes our end when the rank closed its
  /// end (or ended).
  std::vector<control::Message> receive();

  /// Tells the rank that global rank `dead` died. Never blocks; a rank that cannot be told
  /// is logged (at debug level when it has just ended).
  void tell_death(int own_rank, int dead);

 private:
  UniqueFd ours_;
};

}  // namespace hyrun
