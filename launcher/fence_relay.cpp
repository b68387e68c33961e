#include "hyrun/launcher/fence_relay.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <string_view>

#include "hyrun/common/error.hpp"
#include "hyrun/common/hex.hpp"
#include "hyrun/launcher/node_link.hpp"

namespace hyrun {
namespace {

// How far ahead of the oldest open fence a node's part may be: fences are collective, so a
// node is at most one ahead of another; a larger number is not one of this job's.
constexpr std::uint64_t kWindow = 64;
// How many nodes a waiting() line names before it counts the rest.
constexpr std::size_t kNamed = 8;

// "<verb> <number> <hex>": the number and the hex, or nullopt.
std::optional<std::pair<std::uint64_t, std::string_view>> parse(std::string_view body, std::string_view verb) {
  if (!body.starts_with(verb) || body.size() <= verb.size() || body[verb.size()] != ' ') return std::nullopt;
  std::string_view rest = body.substr(verb.size() + 1);
  const auto space = rest.find(' ');
  if (space == std::string_view::npos || space == 0) return std::nullopt;
  std::uint64_t number = 0;
  const auto [end, error] = std::from_chars(rest.data(), rest.data() + space, number);
  if (error != std::errc() || end != rest.data() + space) return std::nullopt;
  return std::make_pair(number, rest.substr(space + 1));
}

std::optional<std::string> bytes_of(std::string_view hex) {
  try {
    const auto bytes = from_hex(hex, "a PMIx fence's data");
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::string hex_of(const std::string& bytes) {
  return to_hex(std::span(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()));
}

}  // namespace

FenceRelay::FenceRelay(int task, std::vector<std::string> hosts, int ranks_per_task, NodeLink* link)
    : task_(task), hosts_(std::move(hosts)), ranks_per_task_(ranks_per_task), link_(link) {}

void FenceRelay::contribute(std::shared_ptr<pmix::PendingFence> fence) {
  const std::uint64_t number = next_++;
  if (link_ == nullptr) {
    if (number == 0)
      spdlog::error("the ranks' PMIx fences across nodes fail: there is no link among the nodes' hyrun processes");
    return fence->fail();
  }
  spdlog::debug("PMIx fence {}: this node's part, {} bytes", number, fence->part().size());
  Open& open = open_[number];
  if (task_ != 0) {
    link_->send_to(0, fmt::format("fence {} {}", number, hex_of(fence->part())));
    open.local = std::move(fence);
    return;
  }
  open.parts[0] = fence->part();
  open.local = std::move(fence);
  complete_if_whole(number);
}

bool FenceRelay::handle(int from_task, const std::string& body) {
  if (task_ == 0) {
    const auto part = parse(body, "fence");
    return part && take_part(from_task, part->first, std::string(part->second));
  }
  const auto whole = parse(body, "fenced");
  return whole && from_task == 0 && take_whole(whole->first, std::string(whole->second));
}

bool FenceRelay::take_part(int task, std::uint64_t number, const std::string& hex) {
  if (task <= 0 || task >= static_cast<int>(hosts_.size()) || number < completed_ || number >= completed_ + kWindow)
    return false;
  auto part = bytes_of(hex);
  if (!part) return false;
  Open& open = open_[number];
  if (!open.parts.emplace(task, std::move(*part)).second) return false;  // a second part of one node
  complete_if_whole(number);
  return true;
}

bool FenceRelay::take_whole(std::uint64_t number, const std::string& hex) {
  const auto it = open_.find(number);
  if (it == open_.end() || !it->second.local) return false;  // the root completes only what every node gave
  auto all = bytes_of(hex);
  if (!all) return false;
  spdlog::debug("PMIx fence {}: complete, {} bytes", number, all->size());
  it->second.local->complete(std::move(*all));
  open_.erase(it);
  return true;
}

void FenceRelay::complete_if_whole(std::uint64_t number) {
  for (auto it = open_.find(completed_); it != open_.end() && number >= completed_; it = open_.find(completed_)) {
    Open& open = it->second;
    if (!open.local || open.parts.size() != hosts_.size()) return;
    std::string all;
    for (const auto& [task, part] : open.parts) all += part;  // task order: the map's
    const std::string line = fmt::format("fenced {} {}", completed_, hex_of(all));
    for (int task = 1; task < static_cast<int>(hosts_.size()); ++task) link_->send_to(task, line);
    spdlog::debug("PMIx fence {}: complete, {} bytes from {} nodes", completed_, all.size(), hosts_.size());
    open.local->complete(std::move(all));
    open_.erase(it);
    ++completed_;
  }
}

std::optional<std::string> FenceRelay::waiting() const {
  if (task_ != 0 || open_.empty()) return std::nullopt;
  const auto& [number, open] = *open_.begin();
  std::vector<std::string> missing;
  std::size_t more = 0;
  for (int task = 0; task < static_cast<int>(hosts_.size()); ++task) {
    if (open.parts.contains(task)) continue;
    if (missing.size() == kNamed) {
      ++more;
      continue;
    }
    const int first = task * ranks_per_task_;
    missing.push_back(ranks_per_task_ == 1
                          ? fmt::format("rank {} on {}", first, hosts_[task])
                          : fmt::format("ranks {}-{} on {}", first, first + ranks_per_task_ - 1, hosts_[task]));
  }
  if (missing.empty()) return std::nullopt;
  return fmt::format("PMIx fence {} (MPI_Init, MPI_Finalize) waits for {}{}", number, fmt::join(missing, ", "),
                     more ? fmt::format(" and the ranks of {} more nodes", more) : "");
}

}  // namespace hyrun
