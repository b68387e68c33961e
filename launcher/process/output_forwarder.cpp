#include "hyrun/process/output_forwarder.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string_view>

namespace hyrun {

OutputForwarder::OutputForwarder(bool label, bool timestamp, std::string output_dir)
    : label_(label), timestamp_(timestamp), files_(std::move(output_dir)) {
  destinations_[0] = launcher_output(1);
  destinations_[1] = launcher_output(2);
}

UniqueFd OutputForwarder::add(int rank, int destination) {
  files_.open(rank);
  Pipe pipe = make_pipe();
  if (broken(destination)) return std::move(pipe.write);  // the read end closes here: writes get EPIPE
  set_nonblocking(pipe.read.get());
  by_fd_[pipe.read.get()] = streams_.size();
  streams_.push_back(Stream{rank, destination, std::move(pipe.read), LineSplitter{}});
  ++open_sources_;
  return std::move(pipe.write);
}

void OutputForwarder::add_poll_fds(std::vector<pollfd>& fds) {
  round_left_ = kRoundBudget;
  round_spent_ = false;
  bool readable[2];
  for (int d = 0; d < 2; ++d) {
    const auto& destination = *destinations_[d];
    readable[d] = draining_ || destination.pending_bytes() < kBackpressure;
    const bool shared = d == 1 && destinations_[1] == destinations_[0];  // polled once
    if (destination.wants_writable() && !shared) fds.push_back({destination.fd(), POLLOUT, 0});
  }
  // In turn: the first stream the last round turned away comes first in this one.
  const std::size_t count = streams_.size();
  for (std::size_t k = 0; k < count; ++k) {
    const auto& s = streams_[(first_stream_ + k) % count];
    if (s.source && readable[s.destination - 1]) fds.push_back({s.source.get(), POLLIN, 0});
  }
}

bool OutputForwarder::on_poll(const pollfd& p) {
  for (int d = 0; d < 2; ++d) {
    auto& destination = *destinations_[d];
    if ((p.events & POLLOUT) && p.fd == destination.fd()) {
      if (p.revents & (POLLOUT | POLLERR | POLLHUP)) {
        destination.on_writable();
        after_write();
      }
      return true;
    }
  }
  const auto it = by_fd_.find(p.fd);
  if (it == by_fd_.end()) return false;
  if (p.revents & (POLLIN | POLLHUP | POLLERR)) read_source(it->second, false);
  return true;
}

void OutputForwarder::read_source(std::size_t index, bool draining) {
  Stream& stream = streams_[index];
  const OutputDestination& destination = *destinations_[stream.destination - 1];
  char buffer[65536];
  // Bounded reads per wake-up, so one flooding rank cannot starve the others; within the
  // round's budget, so many cannot hold the loop; and not past the backpressure mark, which
  // a slow reader's queue would otherwise overshoot by a round's reads.
  for (int reads = 0; reads < kReadsPerWake && stream.source; ++reads) {
    const bool turned_away = round_left_ == 0 || (!draining_ && destination.pending_bytes() >= kBackpressure);
    if (!draining && turned_away) {
      // The next round starts with the first stream this one turned away: this one, unless
      // it was read already (then the one after it).
      if (!round_spent_) first_stream_ = reads == 0 ? index : (index + 1) % streams_.size();
      round_spent_ = true;
      return;
    }
    const ssize_t n = ::read(stream.source.get(), buffer, sizeof buffer);
    if (n > 0) {
      const auto size = static_cast<std::size_t>(n);
      if (!draining) round_left_ -= std::min(size, round_left_);
      held_ -= stream.splitter.pending_size();
      auto pieces = stream.splitter.feed({buffer, size});
      held_ += stream.splitter.pending_size();
      // Past the budget of all streams: this stream's partial line goes now, as a piece.
      if (held_ > kHeldBudget) {
        held_ -= stream.splitter.pending_size();
        pieces.push_back(stream.splitter.finish());
      }
      write_out(stream, pieces);
      after_write();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN && !draining) return;
    close_stream(stream);  // EOF or a read error (or, when draining, nothing more now)
    after_write();
    return;
  }
  // Draining and still more after kReadsPerWake full reads: a writer outlived its group (it
  // got away from kill_all_groups); what it writes from now on is not waited for.
  if (draining) close_stream(stream);
}

void OutputForwarder::write_out(const Stream& stream, const std::vector<std::string>& pieces) {
  std::string prefix;  // one for all pieces of a read: the time it was forwarded, the rank
  if (timestamp_) {
    const auto now = std::chrono::system_clock::now();
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    prefix = fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03d}Z ", fmt::gmtime(std::chrono::system_clock::to_time_t(now)), ms);
  }
  if (label_) prefix += fmt::format("{}: ", stream.rank);
  // A piece of an over-long line ends a line in the files, and a labelled one ends its own
  // prefixed line, so that every output line is prefixed; unlabelled, pieces pass as they came.
  std::string in_files, shown;
  for (const auto& text : pieces) {
    if (text.empty()) continue;
    const bool whole = text.back() == '\n';
    if (files_.enabled()) {
      in_files += text;
      if (!whole) in_files += '\n';
    }
    shown += prefix;
    shown += text;
    if (!prefix.empty() && !whole) shown += '\n';
  }
  if (!in_files.empty()) files_.write(stream.rank, stream.destination, in_files);
  destinations_[stream.destination - 1]->write(shown);  // nothing, once its reader is gone
}

void OutputForwarder::after_write() {
  if (!broken(1) && !broken(2)) return;
  // The reader is gone: the ranks learn it as a pipeline's writer would, on their next write.
  // What was read of their unfinished lines still goes to their --output-filename files.
  for (auto& stream : streams_)
    if (broken(stream.destination)) close_stream(stream);
}

void OutputForwarder::close_stream(Stream& stream) {
  if (!stream.source) return;
  by_fd_.erase(stream.source.get());
  stream.source.reset();
  --open_sources_;
  held_ -= stream.splitter.pending_size();
  std::string rest = stream.splitter.finish();
  if (!rest.empty()) write_out(stream, {rest + "\n"});  // a last line without newline still ends one
}

void OutputForwarder::drain_all() {
  // The writers are gone or killed: read until EOF or until nothing more is there.
  for (std::size_t i = 0; i < streams_.size(); ++i) read_source(i, true);
}

void OutputForwarder::write_own_line(const std::string& line) {
  destinations_[1]->write(line);
  after_write();
}

void OutputForwarder::drop_pending() {
  destinations_[0]->drop_queued();
  destinations_[1]->drop_queued();
}

bool OutputForwarder::has_pending() const {
  return destinations_[0]->wants_writable() || destinations_[1]->wants_writable();
}

}  // namespace hyrun
