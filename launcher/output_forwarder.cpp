#include "launcher/output_forwarder.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

namespace hyrun {

void write_fully(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n >= 0) {
      text.remove_prefix(static_cast<std::size_t>(n));
    } else if (errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 100);
    } else if (errno != EINTR) {
      return;
    }
  }
}

UniqueFd OutputForwarder::add(int rank, int destination) {
  files_.open(rank);
  Pipe pipe = make_pipe();
  set_nonblocking(pipe.read.get());
  streams_.push_back(Stream{rank, destination, std::move(pipe.read), LineSplitter{}});
  return std::move(pipe.write);
}

std::vector<int> OutputForwarder::open_fds() const {
  std::vector<int> fds;
  for (const auto& s : streams_)
    if (s.source) fds.push_back(s.source.get());
  return fds;
}

void OutputForwarder::write_out(const Stream& stream, const std::string& text) const {
  if (text.empty()) return;
  if (const int file = files_.fd(stream.rank, stream.destination); file >= 0) {
    write_fully(file, text);
    if (text.back() != '\n') write_fully(file, "\n");
  }
  if (!label_ && !timestamp_) return write_fully(stream.destination, text);
  std::string prefix;
  if (timestamp_) {
    const auto now = std::chrono::system_clock::now();
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    prefix = fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03d}Z ", fmt::gmtime(std::chrono::system_clock::to_time_t(now)), ms);
  }
  if (label_) prefix += fmt::format("{}: ", stream.rank);
  // A piece of an over-long line gets its own newline so that every output line is prefixed.
  const bool whole = text.back() == '\n';
  write_fully(stream.destination, fmt::format("{}{}{}", prefix, text, whole ? "" : "\n"));
}

void OutputForwarder::close_stream(Stream& stream) {
  std::string rest = stream.splitter.finish();
  if (!rest.empty()) write_out(stream, rest + "\n");  // a last line without newline still ends one
  stream.source.reset();
}

void OutputForwarder::on_readable(int fd) {
  for (auto& stream : streams_) {
    if (stream.source.get() != fd) continue;
    char buffer[65536];
    // Bounded reads per wake-up, so one flooding rank cannot starve the others.
    for (int round = 0; round < 16; ++round) {
      const ssize_t n = ::read(fd, buffer, sizeof buffer);
      if (n > 0) {
        for (const auto& line : stream.splitter.feed({buffer, static_cast<std::size_t>(n)})) write_out(stream, line);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      close_stream(stream);  // EOF or a read error
      return;
    }
    return;
  }
}

void OutputForwarder::drain_all() {
  for (auto& stream : streams_) {
    while (stream.source) {
      const int fd = stream.source.get();
      char buffer[65536];
      const ssize_t n = ::read(fd, buffer, sizeof buffer);
      if (n > 0) {
        for (const auto& line : stream.splitter.feed({buffer, static_cast<std::size_t>(n)})) write_out(stream, line);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      close_stream(stream);  // EOF, EAGAIN (the writers are gone or stuck) or an error
    }
  }
}

}  // namespace hyrun
