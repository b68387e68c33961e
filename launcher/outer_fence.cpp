#include "hyrun/launcher/outer_fence.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <spdlog/spdlog.h>

#include "hyrun/common/error.hpp"

namespace hyrun {
namespace {

// The outer PMIx key of a fence's parts: versioned, and apart from hyrun's other keys.
std::string key_of(std::uint64_t number) { return fmt::format("hyrun.fence.v1.{}", number); }

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

}  // namespace

OuterFence::OuterFence(pmix::ClientProcess& client, std::size_t max_bytes, Done done, Failed failed)
    : client_(client), max_bytes_(max_bytes), done_(std::move(done)), failed_(std::move(failed)) {}

void OuterFence::start(std::uint64_t number, std::string part) {
  queued_.emplace_back(number, std::move(part));
  if (!open_) next();
}

void OuterFence::next() {
  while (!open_ && !queued_.empty()) {
    auto [number, part] = std::move(queued_.front());
    queued_.pop_front();
    spdlog::debug("PMIx fence {}: this node's part, {} bytes, into the outer launcher's fence", number, part.size());
    try {
      client_.start_allgather(key_of(number), std::as_bytes(std::span(part)));
      open_ = number;
      parts_.clear();
      bytes_ = 0;
    } catch (const Error& e) {
      failed_(number, e.what());
    }
  }
}

void OuterFence::add_poll_fds(std::vector<pollfd>& fds) {
  if (open_) fds.push_back({client_.fd(), POLLIN, 0});
}

bool OuterFence::on_poll(const pollfd& p) {
  if (!open_ || p.fd != client_.fd()) return false;
  if (p.revents == 0) return true;
  // Every message there is now: a fence of many nodes sends one a node.
  while (take_one() && readable(client_.fd())) {
  }
  next();
  return true;
}

bool OuterFence::take_one() {
  const std::uint64_t number = *open_;
  std::optional<pmix::ClientProcess::AllgatherPiece> piece;
  try {
    piece = client_.read_allgather();
  } catch (const Error& e) {
    open_.reset();
    failed_(number, e.what());
    return false;
  }
  if (!piece) {
    open_.reset();
    if (bytes_ > max_bytes_) return done_(number, std::nullopt, bytes_), false;
    return done_(number, std::move(parts_), bytes_), false;
  }
  // Ranks come in order, each rank's pieces together: a new rank starts a part.
  if (piece->rank < 0 || piece->rank < static_cast<int>(parts_.size()) - 1 ||
      piece->rank > static_cast<int>(parts_.size())) {
    open_.reset();
    failed_(number, fmt::format("hyrun's PMIx client helper sent rank {}'s part out of order", piece->rank));
    return false;
  }
  if (piece->rank == static_cast<int>(parts_.size())) parts_.emplace_back();
  const bool was_within = bytes_ <= max_bytes_;
  bytes_ += piece->bytes.size();
  if (bytes_ <= max_bytes_)
    parts_.back().append(reinterpret_cast<const char*>(piece->bytes.data()), piece->bytes.size());
  else if (was_within)  // from here on counted, not kept: the fence fails the same on every node
    for (auto& part : parts_) std::string().swap(part);
  return true;
}

}  // namespace hyrun
