#include "hyrun/process/control_channel.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "hyrun/common/death_notice.hpp"
#include "hyrun/common/error.hpp"
#include "hyrun/common/start_rank_request.hpp"

namespace hyrun {
namespace {

control::Message parse(std::string_view text) {
  if (text == kHandlesDeathsMessage) return control::HandlesDeaths{};
  if (const auto asked = parse_start_rank_request(text)) return control::StartRank{*asked};
  if (const auto planned = parse_planned_exit(text)) return *planned;
  return control::Unknown{std::string(text)};
}

}  // namespace

UniqueFd ControlChannel::open() {
  // Datagrams keep each message whole; our end never blocks.
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) throw SystemError("socketpair", errno);
  UniqueFd ours(pair[0]), theirs(pair[1]);
  set_nonblocking(ours.get());
  ours_ = std::move(ours);
  return theirs;
}

std::vector<control::Message> ControlChannel::receive() {
  std::vector<control::Message> messages;
  char message[256];
  bool reset_seen = false;
  while (ours_) {
    const ssize_t n = ::recv(ours_.get(), message, sizeof message, MSG_DONTWAIT);
    if (n > 0) {
      messages.push_back(parse(std::string_view(message, static_cast<std::size_t>(n))));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    // A rank that died with notices unread in its end leaves ECONNRESET on ours, and recv
    // reports it (once) before the messages it sent: a planned exit announced just before a
    // SIGKILL is among them. Read on; the end of the queue then reads as a close.
    if (n < 0 && errno == ECONNRESET && !std::exchange(reset_seen, true)) continue;
    ours_.reset();  // the rank closed it or exited
  }
  return messages;
}

void ControlChannel::tell_death(int own_rank, int dead) {
  if (!ours_) return;  // the rank closed its end: it has ended and needs no news
  const std::string message = format_rank_died(dead);
  // Never blocks: a notice is a few bytes and the rank's library reads them at once.
  if (::send(ours_.get(), message.data(), message.size(), MSG_DONTWAIT | MSG_NOSIGNAL) >= 0) return;
  // A rank that has just ended (not reaped yet) closed its end: it needs no news. A full
  // queue means a rank that stopped reading: said, as it will miss the death.
  if (errno == EPIPE || errno == ECONNRESET)
    spdlog::debug("rank {} ended before it could be told that rank {} died", own_rank, dead);
  else
    spdlog::warn("could not tell rank {} that rank {} died: {}", own_rank, dead, std::strerror(errno));
}

}  // namespace hyrun
