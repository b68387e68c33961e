#pragma once
// Forwards every rank's stdout and stderr to the launcher's own, a whole line at a time,
// optionally stamped with the time it was forwarded (UTC, milliseconds) and labelled with
// the rank: "2026-01-02T03:04:05.678Z 3: text"; with --output-filename, the lines also
// go, unprefixed, to one file per rank and stream.
//
// Never blocks: output goes through OutputDestination queues. While a destination holds
// more than kBackpressure bytes its ranks' pipes are not read, so a slow reader slows the
// ranks down as it would a plain pipeline. When a destination's reader goes away (EPIPE),
// the read ends of that stream of every rank are closed: a rank writing there next gets
// SIGPIPE (or EPIPE), exactly as the first command of `prog | head -1` does. The queues are
// the process's own (launcher_output): one for both when hyrun's stdout and stderr are one file
// (`2>&1`), and hyrun's own lines (OwnStderr) join them, so that lines stay whole.
// What it holds of lines not ended yet has one budget for all streams (kHeldBudget): a stream
// whose partial line would take the total past it forwards that part as a piece at once, so
// that ranks printing without newlines cost hyrun a bounded memory however many they are.
// One round of the loop reads at most kRoundBudget bytes of all streams together, and no more
// once the reader's queue is at kBackpressure; the next round starts with the first stream this
// one turned away. So a signal waits for no more than that however many ranks flood, and no
// flooding rank starves a quiet one. The lines of one read go out as one write, not one a line.
#include <poll.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "hyrun/process/line_splitter.hpp"
#include "hyrun/process/output_destination.hpp"
#include "hyrun/process/rank_output_files.hpp"
#include "hyrun/process/unique_fd.hpp"

namespace hyrun {

class OutputForwarder {
 public:
  static constexpr std::size_t kBackpressure = 1 << 20;
  /// Bytes of partial lines held for all streams together (each stream's line up to 16 MiB
  /// passes whole while the total stays within it; LineSplitter).
  static constexpr std::size_t kHeldBudget = std::size_t{64} << 20;
  /// Bytes read from all streams in one round of the loop (one add_poll_fds and its on_poll
  /// calls). 64 ranks flooding once made one round read 64 MiB and hold SIGTERM for 16 s.
  static constexpr std::size_t kRoundBudget = 1 << 20;
  /// Reads of one stream per wake-up; also the most drain_all() reads of one stream, which
  /// empties any pipe an unprivileged rank can size (pipe-max-size, 1 MiB by default).
  static constexpr int kReadsPerWake = 16;

  /// Writes to hyrun's fds 1 and 2. `output_dir`: --output-filename (see RankOutputFiles);
  /// empty for none.
  explicit OutputForwarder(bool label, bool timestamp = false, std::string output_dir = {});

  /// Creates the pipe for one stream of `rank` (`destination` 1 or 2); returns the write
  /// end for the child. Its read end is closed at once when that destination is broken.
  /// Throws UsageError when the rank's --output-filename files cannot be created.
  UniqueFd add(int rank, int destination);

  /// Appends what poll must watch: sources that may be read, destinations with output queued.
  /// Starts a round: its sources begin with the first one the last round turned away.
  void add_poll_fds(std::vector<pollfd>& fds);
  /// Handles one polled entry; false when `p.fd` is not one of ours.
  bool on_poll(const pollfd& p);
  /// Reads what is left on every stream into the queues (up to kReadsPerWake reads each),
  /// writes partial last lines, closes all.
  void drain_all();
  /// The writers are gone: read their pipes whatever is queued (bounded by what is left).
  void set_draining() { draining_ = true; }
  bool all_closed() const { return open_sources_ == 0; }
  /// Output queued for a reader that is still there.
  bool has_pending() const;
  /// Output queued for hyrun's stdout (1) or stderr (2).
  bool has_pending(int destination) const { return destinations_[destination - 1]->wants_writable(); }
  /// Drops the output its reader has not taken (but for the rest of a line begun).
  void drop_pending();
  /// Queues one line of hyrun's own for its stderr, in order with the ranks' lines.
  void write_own_line(const std::string& line);
  /// Whether the reader of hyrun's stdout (1) or stderr (2) went away.
  bool broken(int destination) const { return destinations_[destination - 1]->broken(); }
  /// The --output-filename files that lost output ("PATH (error)"; RankOutputFiles::lost).
  const std::vector<std::string>& lost_files() const { return files_.lost(); }

 private:
  struct Stream {
    int rank;
    int destination;  // 1 or 2
    UniqueFd source;  // read end, non-blocking
    LineSplitter splitter;
  };
  void read_source(std::size_t index, bool draining);
  /// Forwards lines (and over-long pieces) of one stream as one write to each place; a broken
  /// destination takes nothing, the files still do.
  void write_out(const Stream& stream, const std::vector<std::string>& pieces);
  /// Closes a stream's source and forwards its unfinished last line, ended (and off held_).
  void close_stream(Stream& stream);
  /// Closes the streams whose destination broke. Called after a write, never from write_out
  /// or close_stream, which it calls.
  void after_write();

  bool label_;
  bool timestamp_;
  RankOutputFiles files_;
  std::shared_ptr<OutputDestination> destinations_[2];  // launcher_output(1) and (2)
  std::vector<Stream> streams_;
  std::unordered_map<int, std::size_t> by_fd_;  // source fd -> index in streams_
  std::size_t open_sources_ = 0;
  std::size_t held_ = 0;  // bytes of partial lines in the streams' splitters (kHeldBudget)
  bool draining_ = false;
  std::size_t round_left_ = kRoundBudget;  // bytes this round may still read
  std::size_t first_stream_ = 0;           // where the next round's sources start
  bool round_spent_ = false;               // this round turned a stream away (first_stream_ is set)
};

}  // namespace hyrun
