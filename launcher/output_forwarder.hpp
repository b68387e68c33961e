#pragma once
// Forwards every rank's stdout and stderr to the launcher's own, a whole line at a time,
// optionally stamped with the time it was forwarded (UTC, milliseconds) and labelled with
// the rank: "2026-01-02T03:04:05.678Z 3: text"; with --output-filename, the lines also
// go, unprefixed, to one file per rank and stream.
#include <string>
#include <vector>

#include "launcher/line_splitter.hpp"
#include "launcher/rank_output_files.hpp"
#include "launcher/unique_fd.hpp"

namespace hyrun {

class OutputForwarder {
 public:
  /// `output_dir`: --output-filename (see RankOutputFiles); empty for none.
  explicit OutputForwarder(bool label, bool timestamp = false, std::string output_dir = {})
      : label_(label), timestamp_(timestamp), files_(std::move(output_dir)) {}

  struct Stream {
    int rank;
    int destination;  // 1 or 2
    UniqueFd source;  // read end, non-blocking
    LineSplitter splitter;
  };

  /// Creates the pipe for one stream of `rank`; returns the write end for the child.
  /// Throws UsageError when the rank's --output-filename files cannot be created.
  UniqueFd add(int rank, int destination);

  /// The fds still open, for poll.
  std::vector<int> open_fds() const;
  /// Reads what is available on `fd` and writes out whole lines; closes it at EOF.
  void on_readable(int fd);
  /// Reads everything left on every stream, writes partial last lines, closes all.
  void drain_all();
  bool all_closed() const { return open_fds().empty(); }

 private:
  void write_out(const Stream& stream, const std::string& text) const;
  void close_stream(Stream& stream);
  bool label_;
  bool timestamp_;
  RankOutputFiles files_;
  std::vector<Stream> streams_;
};

/// Writes all of `text` to `fd`, retrying on EINTR/EAGAIN; gives up quietly on a closed
/// destination (EPIPE): the ranks' output then has nowhere to go, which must not stop them.
void write_fully(int fd, std::string_view text);

}  // namespace hyrun
