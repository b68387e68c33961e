// OutputDestination: hyrun's stdout/stderr written without ever blocking the poll loop.
#include "hyrun/process/output_destination.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <string_view>

#include "hyrun/process/unique_fd.hpp"

namespace hyrun {
namespace {

// Lines of random lengths (1 to 300 bytes), `bytes` or a little more in all: a pipe's
// capacity then ends within a line.
std::string random_lines(std::size_t bytes) {
  std::string lines;
  for (int i = 0; lines.size() < bytes; ++i) lines += std::string(1 + std::rand() % 300, 'a' + i % 26) + "\n";
  return lines;
}

// What a reader gets after drop_queued() and "own line": what it had taken of `sent`, the
// line it had begun to its end, then that line.
std::string kept_then_own(const std::string& sent, std::size_t taken) {
  return sent.substr(0, sent.find('\n', taken - 1) + 1) + "own line\n";
}

// Reads what `out` writes into `pipe` until `last` arrived (or 1 s without anything).
std::string read_until(OutputDestination& out, Pipe& pipe, std::string_view last) {
  std::string received;
  char buffer[65536];
  for (;;) {
    out.on_writable();
    pollfd p{pipe.read.get(), POLLIN, 0};
    if (::poll(&p, 1, 1000) != 1) break;
    const ssize_t n = ::read(pipe.read.get(), buffer, sizeof buffer);
    if (n <= 0) break;
    received.append(buffer, static_cast<std::size_t>(n));
    if (!out.wants_writable() && received.ends_with(last)) break;
  }
  return received;
}

// Writes `sent` to a pipe nobody reads, drops the queue and queues "own line"; returns what a
// reader then gets, and in `taken` how much of `sent` the pipe had taken before.
std::string after_a_stall(const std::string& sent, std::size_t& taken) {
  Pipe pipe = make_pipe();
  OutputDestination out(pipe.write.get());
  out.write(sent);
  taken = sent.size() - out.pending_bytes();
  out.drop_queued();
  out.write("own line\n");
  return read_until(out, pipe, "own line\n");
}

TEST(OutputDestination, AStalledReaderQueuesInsteadOfBlocking) {
  Pipe pipe = make_pipe();  // blocking, like a shell's pipe; nobody reads it
  OutputDestination out(pipe.write.get());
  const std::string chunk(1 << 20, 'x');
  out.write(chunk);  // far more than the pipe holds: this returns, the rest waits
  EXPECT_GT(out.pending_bytes(), 0u);
  EXPECT_TRUE(out.wants_writable());
  EXPECT_FALSE(out.broken());
  // The descriptor shared with the parent stays blocking: the parent is not disturbed.
  EXPECT_EQ(fcntl(pipe.write.get(), F_GETFL) & O_NONBLOCK, 0);
}

TEST(OutputDestination, AGoneReaderIsNoticedAndOutputDropped) {
  // hyrun ignores SIGPIPE (main.cpp): a gone reader shows as EPIPE.
  struct IgnorePipe {
    void (*previous)(int) = ::signal(SIGPIPE, SIG_IGN);
    ~IgnorePipe() { ::signal(SIGPIPE, previous); }
  } ignore;
  Pipe pipe = make_pipe();
  OutputDestination out(pipe.write.get());
  out.write(std::string(1 << 20, 'x'));
  pipe.read.reset();  // `| head -1` has exited
  out.on_writable();
  EXPECT_TRUE(out.broken());
  EXPECT_EQ(out.pending_bytes(), 0u);
  out.write("more\n");  // dropped, no error
  EXPECT_FALSE(out.wants_writable());
}

TEST(OutputDestination, DroppingTheQueueKeepsTheRestOfALineTheReaderBegan) {
  // hyrun drops what a stalled reader did not take before its own last lines (RankSupervisor::
  // finish): a reader that wakes then reads the line it had begun to its end, then those lines.
  const std::string sent = random_lines(1 << 20);
  std::size_t taken = 0;
  const std::string received = after_a_stall(sent, taken);
  ASSERT_GT(taken, 0u);
  EXPECT_EQ(received, kept_then_own(sent, taken));
}

TEST(OutputDestination, TheLineBegunIsKeptAlsoAfterTheQueueWasCompacted) {
  // The reader took more than 1 MiB, then stalled; a later write compacted the queue (what was
  // written is erased): the line it had begun is still kept to its end.
  Pipe pipe = make_pipe();
  OutputDestination out(pipe.write.get());
  const std::string sent = random_lines(3 << 20);
  out.write(sent);
  std::string received;
  char buffer[65536];
  while (received.size() < (3u << 19)) {  // 1.5 MiB
    const ssize_t n = ::read(pipe.read.get(), buffer, sizeof buffer);
    ASSERT_GT(n, 0);
    received.append(buffer, static_cast<std::size_t>(n));
    out.on_writable();
  }
  const std::size_t taken = sent.size() - out.pending_bytes();
  out.write("later\n");  // compacts: more than 1 MiB was written
  out.drop_queued();
  out.write("own line\n");
  received += read_until(out, pipe, "own line\n");
  EXPECT_EQ(received, kept_then_own(sent, taken));
}

TEST(OutputDestination, OfALineWithoutEndAtMost4KiBAreKeptThenEnded) {
  // A rank printing without newlines: the rest of its "line" is the whole queue. Only 4 KiB of
  // it are kept, so hyrun's own last lines do not wait behind megabytes.
  std::size_t taken = 0;
  const std::string received = after_a_stall(std::string(1 << 20, 'x'), taken);
  ASSERT_GT(taken, 0u);
  EXPECT_EQ(received, std::string(taken + OutputDestination::kKeptLine, 'x') + "\nown line\n");
}

TEST(OutputDestination, EverythingArrivesInOrderWhenTheReaderReads) {
  Pipe pipe = make_pipe();
  OutputDestination out(pipe.write.get());
  std::string sent;
  for (int i = 0; i < 20000; ++i) sent += "line " + std::to_string(i) + "\n";
  out.write(sent);
  std::string received;
  char buffer[65536];
  while (received.size() < sent.size()) {
    pollfd p{pipe.read.get(), POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 5000), 1);
    const ssize_t n = ::read(pipe.read.get(), buffer, sizeof buffer);
    ASSERT_GT(n, 0);
    received.append(buffer, static_cast<std::size_t>(n));
    out.on_writable();
  }
  EXPECT_EQ(received, sent);
  EXPECT_FALSE(out.wants_writable());
}

}  // namespace
}  // namespace hyrun
