#include "hyrun/process/output_forwarder.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string_view>

namespace hyrun {

OutputForwarder::OutputForwarder(bool label, bool timestamp, std::string output_dir)
    : label_(label), timestamp_(timestamp), files_(std::move(output_dir)) {
  destinations_[0] = std::make_shared<OutputDestination>(1);
  // `2>&1`: one file behind both. Two queues would each write what the file takes and
  // splice one stream's lines into the middle of the other's once the reader falls behind.
  struct stat out {
  }, err{};
  const bool same =
      ::fstat(1, &out) == 0 && ::fstat(2, &err) == 0 && out.st_dev == err.st_dev && out.st_ino == err.st_ino;
  destinations_[1] = same ? destinations_[0] : std::make_shared<OutputDestination>(2);
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

void OutputForwarder::add_poll_fds(std::vector<pollfd>& fds) const {
  bool readable[2];
  for (int d = 0; d < 2; ++d) {
    const auto& destination = *destinations_[d];
    readable[d] = draining_ || destination.pending_bytes() < kBackpressure;
    const bool shared = d == 1 && destinations_[1] == destinations_[0];  // polled once
    if (destination.wants_writable() && !shared) fds.push_back({destination.fd(), POLLOUT, 0});
  }
  for (const auto& s : streams_)
    if (s.source && readable[s.destination - 1]) fds.push_back({s.source.get(), POLLIN, 0});
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
  if (p.revents & (POLLIN | POLLHUP | POLLERR)) read_source(streams_[it->second], false);
  return true;
}

void OutputForwarder::read_source(Stream& stream, bool draining) {
  char buffer[65536];
  // Bounded reads per wake-up, so one flooding rank cannot starve the others.
  for (int round = 0; (draining || round < 16) && stream.source; ++round) {
    const ssize_t n = ::read(stream.source.get(), buffer, sizeof buffer);
    if (n > 0) {
      held_ -= stream.splitter.pending_size();
      for (const auto& line : stream.splitter.feed({buffer, static_cast<std::size_t>(n)})) write_out(stream, line);
      held_ += stream.splitter.pending_size();
      // Past the budget of all streams: this stream's partial line goes now, as a piece.
      if (held_ > kHeldBudget) {
        held_ -= stream.splitter.pending_size();
        write_out(stream, stream.splitter.finish());
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN && !draining) return;
    close_stream(stream);  // EOF or a read error (or, when draining, nothing more now)
    return;
  }
}

void OutputForwarder::write_out(const Stream& stream, const std::string& text) {
  if (text.empty()) return;
  files_.write(stream.rank, stream.destination, text);
  if (text.back() != '\n') files_.write(stream.rank, stream.destination, "\n");
  auto& destination = *destinations_[stream.destination - 1];
  if (!label_ && !timestamp_) {
    destination.write(text);
  } else {
    std::string prefix;
    if (timestamp_) {
      const auto now = std::chrono::system_clock::now();
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
      prefix = fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03d}Z ", fmt::gmtime(std::chrono::system_clock::to_time_t(now)), ms);
    }
    if (label_) prefix += fmt::format("{}: ", stream.rank);
    // A piece of an over-long line gets its own newline so that every output line is prefixed.
    const bool whole = text.back() == '\n';
    destination.write(fmt::format("{}{}{}", prefix, text, whole ? "" : "\n"));
  }
  after_write();
}

void OutputForwarder::after_write() {
  if (!broken(1) && !broken(2)) return;
  // The reader is gone: the ranks learn it as a pipeline's writer would, on their next write.
  for (auto& stream : streams_)
    if (broken(stream.destination) && stream.source) {
      by_fd_.erase(stream.source.get());
      stream.source.reset();
      --open_sources_;
    }
}

void OutputForwarder::close_stream(Stream& stream) {
  if (!stream.source) return;
  by_fd_.erase(stream.source.get());
  stream.source.reset();
  --open_sources_;
  held_ -= stream.splitter.pending_size();
  std::string rest = stream.splitter.finish();
  if (!rest.empty()) write_out(stream, rest + "\n");  // a last line without newline still ends one
}

void OutputForwarder::drain_all() {
  // The writers are gone or killed: read until EOF or until nothing more is there.
  for (auto& stream : streams_) read_source(stream, true);
}

void OutputForwarder::write_own_line(const std::string& line) {
  destinations_[1]->write(line);
  after_write();
}

bool OutputForwarder::has_pending() const {
  return destinations_[0]->wants_writable() || destinations_[1]->wants_writable();
}

}  // namespace hyrun
