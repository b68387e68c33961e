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
                     ServeLocal serve_local, std::size_t max_bytes)
    : task_(task),
      layout_(std::move(layout)),
      hosts_(std::move(hosts)),
      max_bytes_(max_bytes),
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
  const std::size_t bytes = fence->data().size();
  part_bytes_ += bytes;
  spdlog::debug("PMIx fence {}: this node's part, {} bytes", number, bytes);
  OpenFence& open = fences_[number];
  open.local = std::move(fence);
  if (gather_) {
    std::string part = "p";
    if (bytes > max_bytes_)
      part = "f" + too_much(bytes, fmt::format("the data of {}",
                                               layout_.describe_task(task_, hosts_[static_cast<std::size_t>(task_)])));
    else
      part += open.local->data();
    return gather_(number, std::move(part));
  }
  if (task_ != 0) {
    if (open.failed) {  // the root said so before this node's ranks came
      open.local->refuse_as_too_large();
      fences_.erase(number);
    } else if (bytes > max_bytes_) {
      fail_fence(number,
                 too_much(bytes, fmt::format("the data of {}",
                                             layout_.describe_task(task_, hosts_[static_cast<std::size_t>(task_)]))),
                 task_);
    } else {
      send_pieces(0, format_link_pieces(LinkFencePart{number, open.local->data()}));
    }
    return;
  }
  if (!open.failed) {
    open.parts[0] = open.local->data();
    open.bytes += bytes;
    if (open.bytes > max_bytes_) fail_fence(number, too_much_in(open), 0);
  }
  complete_fences();
}

std::string PmixRelay::too_much(std::size_t bytes, std::string_view what) const {
  const auto size = [](std::size_t b) {
    if (b % (std::size_t{1} << 20) == 0 && b > 0) return fmt::format("{} MiB", b >> 20);
    if (b >= std::size_t{1} << 20) return fmt::format("{:.1f} MiB", static_cast<double>(b) / (1 << 20));
    return fmt::format("{} bytes", b);
  };
  return fmt::format(
      "{} is {}, more than the {} that hyrun relays between nodes in one fence (docs/pmix.md, "
      "\"Limits\"): the ranks' fence fails; put less before a fence that collects data",
      what, size(bytes), size(max_bytes_));
}

// Root: what a fence's parts so far are too much as.
std::string PmixRelay::too_much_in(const OpenFence& open) const {
  if (open.parts.size() == hosts_.size()) return too_much(open.bytes, "its data from every node");
  return too_much(open.bytes,
                  fmt::format("its data from {} of the {} nodes (so far)", open.parts.size(), hosts_.size()));
}

void PmixRelay::fail_fence(std::uint64_t number, const std::string& why, int told_by) {
  spdlog::error("PMIx fence {} failed: {}", number, why);
  OpenFence& open = fences_[number];
  open.failed = true;
  open.parts.clear();
  open.bytes = 0;
  const std::string line = format_link(LinkFenceFailed{number, why.substr(0, kLinkMaxWhy)});
  if (task_ != 0) {
    if (told_by == task_) {
      send_(0, line);
      // The root may have failed it too before this word came: its own word is then no news.
      failed_.insert(number);
      std::erase_if(failed_, [this](std::uint64_t n) { return n + kWindow < next_fence_; });
    }
    if (open.local) {
      open.local->refuse_as_too_large();
      fences_.erase(number);
    }
    return;
  }
  for (int t = 1; t < static_cast<int>(hosts_.size()); ++t)
    if (t != told_by && !send_(t, line)) unreached_[number].tasks.insert(t);
  if (const auto it = unreached_.find(number); it != unreached_.end()) it->second.line = line;
  complete_fences();
}

void PmixRelay::send_pieces(int task, const std::vector<std::string>& bodies) {
  for (const auto& body : bodies) send_(task, body);
}

void PmixRelay::direct_modex(std::uint32_t rank, std::shared_ptr<pmix::PendingRequest> request) {
  if (!usable(request)) return;
  if (!in_job(rank) || asked_.size() >= kMaxOpen) return request->fail();
  const std::uint64_t id = next_id_++;
  const int holder = holder_of(rank);
  spdlog::debug("PMIx direct modex {}: rank {}'s data, from {}", id, rank, hosts_[holder]);
  Asked& asked = asked_[id] = Asked{std::move(request), 0};
  if (task_ == 0) return route(0, id, rank);
  const std::string get = format_link(LinkDmodexGet{id, rank});
  if (holder != 0 && ask_ && ask_(holder, get)) {
    asked.via = holder;
    return;
  }
  send_(0, get);
}

void PmixRelay::direct_through(Direct ask, Direct reply) {
  ask_ = std::move(ask);
  reply_ = std::move(reply);
}

void PmixRelay::unreachable(int task) {
  // A node: an answer cut off with its connection. The root's come on the holder's own link.
  if (task_ != 0) pieces_.erase(task);
  fail_asked_of(task, true);
}

void PmixRelay::gone(int task) {
  pieces_.erase(task);
  fail_asked_of(task, false);
}

void PmixRelay::fail_asked_of(int task, bool own_only) {
  for (auto it = asked_.begin(); it != asked_.end();)
    if (it->second.via == task) {
      spdlog::debug("PMIx direct modex {}: {} can answer no more", it->first, hosts_[task]);
      it->second.request->fail();
      it = asked_.erase(it);
    } else {
      ++it;
    }
  // Root: what it passed on to that holder is answered "none"; an answer that still comes (the
  // holder later than the root could wait for it) is dropped.
  std::vector<std::uint64_t> routed;
  for (const auto& [id, to] : routed_)
    if (to.holder == task && (to.own || !own_only)) routed.push_back(id);
  for (const std::uint64_t id : routed) {
    spdlog::debug("PMIx direct modex {}: {} can answer no more", id, hosts_[task]);
    answer(task, id, std::nullopt);
    abandoned_[id] = task;
  }
  while (abandoned_.size() > kMaxOpen) abandoned_.erase(abandoned_.begin());
}

void PmixRelay::route(int task, std::uint64_t id, std::uint32_t rank) {
  const std::uint64_t routed = next_id_++;
  const int holder = holder_of(rank);
  routed_[routed] = Routed{task, id, holder};
  if (holder == 0) return serve(0, routed, rank);
  // On the holder's connection to the root; else on one of the root's own (not linked with
  // the root yet, or not at all: NodeLink::ask). The holder answers on its connection.
  const std::string get = format_link(LinkDmodexGet{routed, rank});
  if (send_(holder, get)) return;
  if (ask_ && ask_(holder, get)) {
    routed_[routed].own = true;
    return;
  }
  spdlog::debug("PMIx direct modex {}: no connection to {}", routed, hosts_[holder]);
  answer(holder, routed, std::nullopt);
}

void PmixRelay::serve(int to, std::uint64_t id, std::uint32_t rank) {
  const std::uint64_t serving = next_id_++;
  serving_[serving] = Serving{to, id, rank};
  serve_local_(rank, serving);
}

void PmixRelay::local_data(std::uint64_t id, bool ok, std::string data) {
  const auto it = serving_.find(id);
  if (it == serving_.end()) return;
  const Serving to = it->second;
  serving_.erase(it);
  if (ok && data.size() > max_bytes_) {
    spdlog::error("PMIx direct modex of rank {} failed: {}", to.rank,
                  too_much(data.size(), fmt::format("rank {}'s data", to.rank)));
    ok = false;
  }
  if (to.to == task_) {
    answer(task_, to.id, ok ? std::optional(std::move(data)) : std::nullopt);
    return;
  }
  // To the root on its connection; to a node that asked straight, back on its own.
  const auto send = [&](const std::string& body) { return to.to == 0 ? send_(0, body) : reply_(to.to, body); };
  if (!ok) {
    send(format_link(LinkDmodexNone{to.id}));
    return;
  }
  for (const auto& body : format_link_pieces(LinkDmodexData{to.id, std::move(data)}))
    if (!send(body)) return;  // the asker's connection is gone
}

bool PmixRelay::answer(int from, std::uint64_t id, std::optional<std::string> data) {
  if (task_ == 0) {  // a request the root routed: answer whoever asked
    const auto it = routed_.find(id);
    if (it == routed_.end()) {  // answered "none" already when its holder became unreachable
      const auto late = abandoned_.find(id);
      if (late == abandoned_.end() || late->second != from) return false;
      abandoned_.erase(late);
      return true;
    }
    if (it->second.holder != from) return false;
    const Routed to = it->second;
    routed_.erase(it);
    if (to.task != 0) {
      if (data)
        send_pieces(to.task, format_link_pieces(LinkDmodexData{to.id, std::move(*data)}));
      else
        send_(to.task, format_link(LinkDmodexNone{to.id}));
      return true;
    }
    id = to.id;
    from = 0;
  }
  const auto it = asked_.find(id);
  if (it == asked_.end() || it->second.via != from) return false;
  spdlog::debug("PMIx direct modex {}: {}", id, data ? fmt::format("{} bytes", data->size()) : "no data");
  if (data)
    it->second.request->complete(std::move(*data));
  else
    it->second.request->fail();
  asked_.erase(it);
  return true;
}

bool PmixRelay::handle(int from_task, std::string_view body) {
  const auto kind = link_kind_of(body);
  if (!kind) return false;
  // After a piece, only the rest of its message: more pieces, then a line of bytes.
  const bool bytes_line = *kind == LinkKind::kMore || *kind == LinkKind::kFence || *kind == LinkKind::kFenced ||
                          *kind == LinkKind::kDmodexData;
  // A node's requests straight to this one come on a connection of their own (NodeLink::ask),
  // beside the one its answers' pieces come on (the root's too: it asks on one of its own a
  // node that is not linked with it).
  const bool own_connection = *kind == LinkKind::kDmodexGet && task_ != 0;
  if (!bytes_line && !own_connection && pieces_.contains(from_task)) return false;
  switch (*kind) {
    case LinkKind::kMore: {
      auto more = parse_link<LinkMore>(body);
      return more && take_piece(from_task, std::move(more->data));
    }
    case LinkKind::kFenceFailed: {
      const auto failed = parse_link<LinkFenceFailed>(body);
      return failed && take_failure(from_task, failed->number, failed->why);
    }
    case LinkKind::kDmodexGet: {
      const auto get = parse_link<LinkDmodexGet>(body);
      if (!get || !in_job(get->rank)) return false;
      const int holder = holder_of(get->rank);
      if (task_ == 0) {  // from a node that wants another node's rank
        if (holder == from_task || routed_.size() >= kMaxOpen) return false;
        route(from_task, get->id, get->rank);
      } else {  // one of this node's ranks: asked by the root, or straight by a node
        if (holder != task_ || (from_task != 0 && !reply_) || serving_.size() >= kMaxOpen) return false;
        serve(from_task, get->id, get->rank);
      }
      return true;
    }
    case LinkKind::kDmodexData: {
      auto data = parse_link<LinkDmodexData>(body);
      auto bytes = data ? assemble(from_task, std::move(data->data)) : std::nullopt;
      return bytes && answer(from_task, data->number, std::move(*bytes));
    }
    case LinkKind::kDmodexNone: {
      const auto none = parse_link<LinkDmodexNone>(body);
      return none && answer(from_task, none->id, std::nullopt);
    }
    case LinkKind::kFence: {
      auto part = parse_link<LinkFencePart>(body);
      auto bytes = part ? assemble(from_task, std::move(part->data)) : std::nullopt;
      return bytes && task_ == 0 && take_part(from_task, part->number, std::move(*bytes));
    }
    case LinkKind::kFenced: {
      auto whole = parse_link<LinkFenceWhole>(body);
      auto bytes = whole ? assemble(from_task, std::move(whole->data)) : std::nullopt;
      return bytes && task_ != 0 && from_task == 0 && take_whole(whole->number, std::move(*bytes));
    }
    default: return false;  // not one of the relay's kinds
  }
}

bool PmixRelay::take_piece(int task, std::string piece) {
  std::string& so_far = pieces_[task];
  if (so_far.size() + piece.size() > max_bytes_) return false;  // no hyrun of this version sends more
  so_far += piece;
  return true;
}

std::optional<std::string> PmixRelay::assemble(int task, std::string last) {
  const auto it = pieces_.find(task);
  if (it == pieces_.end()) return last.size() > max_bytes_ ? std::nullopt : std::optional(std::move(last));
  std::string all = std::move(it->second);
  pieces_.erase(it);
  if (all.size() + last.size() > max_bytes_) return std::nullopt;
  all += last;
  return all;
}

bool PmixRelay::take_part(int task, std::uint64_t number, std::string part) {
  if (task <= 0 || task >= static_cast<int>(hosts_.size()) || number >= completed_fences_ + kWindow) return false;
  // A part sent before the node heard of the failure, or by one that the word did not reach.
  if (failed_.contains(number)) return retell_failure(task, number), true;
  if (number < completed_fences_) return false;
  OpenFence& open = fences_[number];
  if (open.failed) return retell_failure(task, number), true;
  const std::size_t bytes = part.size();
  if (!open.parts.emplace(task, std::move(part)).second) return false;  // a second part of one node
  open.bytes += bytes;
  if (open.bytes > max_bytes_) return fail_fence(number, too_much_in(open), -1), true;
  complete_fences();
  return true;
}

void PmixRelay::retell_failure(int task, std::uint64_t number) {
  const auto it = unreached_.find(number);
  if (it == unreached_.end() || it->second.tasks.erase(task) == 0) return;
  send_(task, it->second.line);
}

bool PmixRelay::take_failure(int from_task, std::uint64_t number, const std::string& why) {
  if (task_ == 0) {  // a node whose own part is too large
    if (from_task <= 0 || number >= completed_fences_ + kWindow) return false;
    if (failed_.contains(number)) return true;
    if (number < completed_fences_) return false;
    if (!fences_[number].failed) fail_fence(number, why, from_task);
    return true;
  }
  // From the root: a fence of this node's that is open, or that its ranks have not reached.
  if (from_task != 0 || number >= next_fence_ + kWindow) return false;
  if (failed_.erase(number) > 0) return true;  // one this node failed itself (its own part)
  const auto it = fences_.find(number);
  if (it == fences_.end() && number < next_fence_) return false;  // completed here, or failed already
  if (it != fences_.end() && it->second.failed) return false;     // said twice
  fail_fence(number, why, 0);
  return true;
}

bool PmixRelay::take_whole(std::uint64_t number, std::string all) {
  const auto it = fences_.find(number);
  if (it == fences_.end() || !it->second.local || it->second.failed)
    return false;  // the root completes only what every node gave
  spdlog::debug("PMIx fence {}: complete, {} bytes", number, all.size());
  it->second.local->complete(std::move(all));
  fences_.erase(it);
  return true;
}

// Root: completes the oldest fences that every node has given its part of, in order.
void PmixRelay::complete_fences() {
  for (auto it = fences_.find(completed_fences_); it != fences_.end(); it = fences_.find(completed_fences_)) {
    OpenFence& open = it->second;
    if (!open.local) return;
    if (open.failed) {
      open.local->refuse_as_too_large();
      fences_.erase(it);
      failed_.insert(completed_fences_++);
      std::erase_if(failed_, [this](std::uint64_t n) { return n + kWindow < completed_fences_; });
      std::erase_if(unreached_, [this](const auto& u) { return u.first + kWindow < completed_fences_; });
      continue;
    }
    if (open.parts.size() != hosts_.size()) return;
    LinkFenceWhole whole{completed_fences_, {}};
    whole.data.reserve(open.bytes);
    for (const auto& [task, part] : open.parts) whole.data += part;  // task order: the map's
    open.parts.clear();
    for (auto& body : format_link_pieces(whole)) broadcast_(std::move(body));
    std::string all = std::move(whole.data);
    spdlog::debug("PMIx fence {}: complete, {} bytes from {} nodes", completed_fences_, all.size(), hosts_.size());
    open.local->complete(std::move(all));
    fences_.erase(it);
    ++completed_fences_;
  }
}

void PmixRelay::gathered(std::uint64_t number, std::optional<std::vector<std::string>> parts, std::size_t bytes) {
  const auto it = fences_.find(number);
  if (it == fences_.end() || !it->second.local) return;
  const auto local = std::move(it->second.local);
  fences_.erase(it);
  std::string why;
  if (!parts) {
    why = too_much(bytes - std::min(bytes, hosts_.size()), "its data from every node");  // less each part's mark
  } else if (parts->size() != hosts_.size()) {
    why = fmt::format("the outer launcher's fence gave {} parts for {} nodes", parts->size(), hosts_.size());
  } else {
    for (std::size_t task = 0; task < parts->size() && why.empty(); ++task) {
      const std::string& part = (*parts)[task];
      if (part.empty() || (part[0] != 'p' && part[0] != 'f'))
        why = fmt::format("the part of {} is not a hyrun relay's",
                          layout_.describe_task(static_cast<int>(task), hosts_[task]));
      else if (part[0] == 'f')
        why = part.substr(1, kLinkMaxWhy);
    }
  }
  std::string all;
  if (why.empty()) {
    all.reserve(bytes);
    for (const auto& part : *parts) all.append(part, 1);
    if (all.size() > max_bytes_) why = too_much(all.size(), "its data from every node");
  }
  if (!why.empty()) {
    spdlog::error("PMIx fence {} failed: {}", number, why);
    return local->refuse_as_too_large();
  }
  spdlog::debug("PMIx fence {}: complete, {} bytes from {} nodes", number, all.size(), hosts_.size());
  local->complete(std::move(all));
}

void PmixRelay::gather_failed(std::uint64_t number, const std::string& why) {
  const auto it = fences_.find(number);
  if (it == fences_.end() || !it->second.local) return;
  spdlog::error("PMIx fence {} failed in the outer launcher: {}", number, why);
  it->second.local->fail();
  fences_.erase(it);
}

std::optional<std::string> PmixRelay::waiting() const {
  if (gather_) {
    if (fences_.empty()) return std::nullopt;
    return fmt::format("PMIx fence {} (MPI_Init, MPI_Finalize) was open, in the outer launcher's fence",
                       fences_.begin()->first);
  }
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
