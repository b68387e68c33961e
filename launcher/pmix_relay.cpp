#include "hyrun/launcher/pmix_relay.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <string_view>
#include <utility>

#include "hyrun/common/error.hpp"

namespace hyrun {
namespace {

// How far ahead of the oldest open fence a node's part may be: fences are collective, so a
// node is at most one ahead of another; a larger number is not one of this job's.
constexpr std::uint64_t kWindow = 64;
// How many nodes a waiting() line names before it counts the rest.
constexpr std::size_t kNamed = 8;
// Direct modex requests open at once on one node (each is a client waiting in PMIx_Get).
constexpr std::size_t kMaxOpen = 1 << 16;

}  // namespace

PmixRelay::PmixRelay(int task, JobLayout layout, std::vector<std::string> hosts, Send send, Broadcast broadcast,
                     ServeLocal serve_local)
    : task_(task),
      layout_(std::move(layout)),
      hosts_(std::move(hosts)),
      send_(std::move(send)),
      broadcast_(std::move(broadcast)),
      serve_local_(std::move(serve_local)) {
  if (static_cast<int>(hosts_.size()) != layout_.tasks())
    throw Error(fmt::format("the PMIx relay got {} hosts for a job of {} tasks", hosts_.size(), layout_.tasks()));
}

bool PmixRelay::usable(const std::shared_ptr<pmix::PendingRequest>& request) {
  if (send_) return true;
  if (!std::exchange(said_no_link_, true))
    spdlog::error(
        "the ranks' PMIx fences and data across nodes fail: there is no link among the nodes' hyrun processes");
  request->fail();
  return false;
}

void PmixRelay::fence(std::shared_ptr<pmix::PendingRequest> fence) {
  if (!usable(fence)) return;
  const std::uint64_t number = next_fence_++;
  spdlog::debug("PMIx fence {}: this node's part, {} bytes", number, fence->data().size());
  OpenFence& open = fences_[number];
  if (task_ != 0) {
    send_(0, format_link(LinkFencePart{number, fence->data()}));
    open.local = std::move(fence);
    return;
  }
  open.parts[0] = fence->data();
  open.local = std::move(fence);
  complete_fences();
}

void PmixRelay::direct_modex(std::uint32_t rank, std::shared_ptr<pmix::PendingRequest> request) {
  if (!usable(request)) return;
  if (!in_job(rank) || asked_.size() >= kMaxOpen) return request->fail();
  const std::uint64_t id = next_id_++;
  spdlog::debug("PMIx direct modex {}: rank {}'s data, from {}", id, rank, hosts_[holder_of(rank)]);
  asked_[id] = std::move(request);
  if (task_ == 0) return route(0, id, rank);
  send_(0, format_link(LinkDmodexGet{id, rank}));
}

void PmixRelay::route(int task, std::uint64_t id, std::uint32_t rank) {
  const std::uint64_t routed = next_id_++;
  routed_[routed] = Routed{task, id};
  if (const int holder = holder_of(rank); holder != 0)
    send_(holder, format_link(LinkDmodexGet{routed, rank}));
  else
    serve(routed, rank);
}

void PmixRelay::serve(std::uint64_t id, std::uint32_t rank) {
  const std::uint64_t serving = next_id_++;
  serving_[serving] = id;
  serve_local_(rank, serving);
}

void PmixRelay::local_data(std::uint64_t id, bool ok, std::string data) {
  const auto it = serving_.find(id);
  if (it == serving_.end()) return;
  const std::uint64_t routed = it->second;
  serving_.erase(it);
  if (task_ == 0) {
    answer(routed, ok ? std::optional(std::move(data)) : std::nullopt);
    return;
  }
  send_(0, ok ? format_link(LinkDmodexData{routed, std::move(data)}) : format_link(LinkDmodexNone{routed}));
}

bool PmixRelay::answer(std::uint64_t id, std::optional<std::string> data) {
  if (task_ == 0) {  // a request the root routed: answer whoever asked
    const auto it = routed_.find(id);
    if (it == routed_.end()) return false;
    const Routed to = it->second;
    routed_.erase(it);
    if (to.task != 0) {
      send_(to.task, data ? format_link(LinkDmodexData{to.id, std::move(*data)}) : format_link(LinkDmodexNone{to.id}));
      return true;
    }
    id = to.id;
  }
  const auto it = asked_.find(id);
  if (it == asked_.end()) return false;
  spdlog::debug("PMIx direct modex {}: {}", id, data ? fmt::format("{} bytes", data->size()) : "no data");
  if (data)
    it->second->complete(std::move(*data));
  else
    it->second->fail();
  asked_.erase(it);
  return true;
}

bool PmixRelay::handle(int from_task, std::string_view body) {
  const auto kind = link_kind_of(body);
  if (!kind) return false;
  switch (*kind) {
    case LinkKind::kDmodexGet: {
      const auto get = parse_link<LinkDmodexGet>(body);
      if (!get || !in_job(get->rank)) return false;
      const int holder = holder_of(get->rank);
      if (task_ == 0) {  // from a node that wants another node's rank
        if (holder == from_task || routed_.size() >= kMaxOpen) return false;
        route(from_task, get->id, get->rank);
      } else {  // from the root: one of this node's ranks
        if (holder != task_ || from_task != 0) return false;
        serve(get->id, get->rank);
      }
      return true;
    }
    case LinkKind::kDmodexData: {
      auto data = parse_link<LinkDmodexData>(body);
      return data && answer(data->number, std::move(data->data));
    }
    case LinkKind::kDmodexNone: {
      const auto none = parse_link<LinkDmodexNone>(body);
      return none && answer(none->id, std::nullopt);
    }
    case LinkKind::kFence: {
      auto part = parse_link<LinkFencePart>(body);
      return part && task_ == 0 && take_part(from_task, part->number, std::move(part->data));
    }
    case LinkKind::kFenced: {
      auto whole = parse_link<LinkFenceWhole>(body);
      return whole && task_ != 0 && from_task == 0 && take_whole(whole->number, std::move(whole->data));
    }
    default: return false;  // not one of the relay's kinds
  }
}

bool PmixRelay::take_part(int task, std::uint64_t number, std::string part) {
  if (task <= 0 || task >= static_cast<int>(hosts_.size()) || number < completed_fences_ ||
      number >= completed_fences_ + kWindow)
    return false;
  if (!fences_[number].parts.emplace(task, std::move(part)).second) return false;  // a second part of one node
  complete_fences();
  return true;
}

bool PmixRelay::take_whole(std::uint64_t number, std::string all) {
  const auto it = fences_.find(number);
  if (it == fences_.end() || !it->second.local) return false;  // the root completes only what every node gave
  spdlog::debug("PMIx fence {}: complete, {} bytes", number, all.size());
  it->second.local->complete(std::move(all));
  fences_.erase(it);
  return true;
}

// Root: completes the oldest fences that every node has given its part of, in order.
void PmixRelay::complete_fences() {
  for (auto it = fences_.find(completed_fences_); it != fences_.end(); it = fences_.find(completed_fences_)) {
    OpenFence& open = it->second;
    if (!open.local || open.parts.size() != hosts_.size()) return;
    std::string all;
    for (const auto& [task, part] : open.parts) all += part;  // task order: the map's
    broadcast_(format_link(LinkFenceWhole{completed_fences_, all}));
    spdlog::debug("PMIx fence {}: complete, {} bytes from {} nodes", completed_fences_, all.size(), hosts_.size());
    open.local->complete(std::move(all));
    fences_.erase(it);
    ++completed_fences_;
  }
}

std::optional<std::string> PmixRelay::waiting() const {
  if (task_ != 0 || fences_.empty()) return std::nullopt;
  const auto& [number, open] = *fences_.begin();
  std::vector<std::string> missing;
  std::size_t more = 0;
  for (int task = 0; task < static_cast<int>(hosts_.size()); ++task) {
    if (open.parts.contains(task)) continue;
    if (missing.size() == kNamed) {
      ++more;
      continue;
    }
    missing.push_back(layout_.describe_task(task, hosts_[task]));
  }
  if (missing.empty()) return std::nullopt;
  return fmt::format("PMIx fence {} (MPI_Init, MPI_Finalize) waits for {}{}", number, fmt::join(missing, ", "),
                     more ? fmt::format(" and the ranks of {} more nodes", more) : "");
}

}  // namespace hyrun
