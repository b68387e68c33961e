#include "hyrun/launcher/pmix_relay.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <span>
#include <string_view>

#include "hyrun/common/error.hpp"
#include "hyrun/common/hex.hpp"

namespace hyrun {
namespace {

// How far ahead of the oldest open fence a node's part may be: fences are collective, so a
// node is at most one ahead of another; a larger number is not one of this job's.
constexpr std::uint64_t kWindow = 64;
// How many nodes a waiting() line names before it counts the rest.
constexpr std::size_t kNamed = 8;
// Direct modex requests open at once on one node (each is a client waiting in PMIx_Get).
constexpr std::size_t kMaxOpen = 1 << 16;

std::optional<std::uint64_t> number_of(std::string_view text) {
  std::uint64_t number = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return number;
}

// "<verb> <number>[ <rest>]": the number and the rest, or nullopt.
std::optional<std::pair<std::uint64_t, std::string_view>> parse(std::string_view body, std::string_view verb) {
  if (!body.starts_with(verb) || body.size() <= verb.size() || body[verb.size()] != ' ') return std::nullopt;
  const std::string_view rest = body.substr(verb.size() + 1);
  const auto space = rest.find(' ');
  const auto number = number_of(rest.substr(0, space));
  if (!number) return std::nullopt;
  return std::make_pair(*number, space == std::string_view::npos ? std::string_view() : rest.substr(space + 1));
}

std::optional<std::string> bytes_of(std::string_view hex) {
  try {
    const auto bytes = from_hex(hex, "PMIx data on the node link");
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::string hex_of(const std::string& bytes) {
  return to_hex(std::span(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()));
}

}  // namespace

PmixRelay::PmixRelay(int task, JobLayout layout, std::vector<std::string> hosts, Send send, ServeLocal serve_local)
    : task_(task),
      layout_(std::move(layout)),
      hosts_(std::move(hosts)),
      send_(std::move(send)),
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
    send_(0, fmt::format("fence {} {}", number, hex_of(fence->data())));
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
  send_(0, fmt::format("dmodex-get {} {}", id, rank));
}

void PmixRelay::route(int task, std::uint64_t id, std::uint32_t rank) {
  const std::uint64_t routed = next_id_++;
  routed_[routed] = Routed{task, id};
  if (const int holder = holder_of(rank); holder != 0)
    send_(holder, fmt::format("dmodex-get {} {}", routed, rank));
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
  send_(0, ok ? fmt::format("dmodex-data {} {}", routed, hex_of(data)) : fmt::format("dmodex-none {}", routed));
}

bool PmixRelay::answer(std::uint64_t id, std::optional<std::string> data) {
  if (task_ == 0) {  // a request the root routed: answer whoever asked
    const auto it = routed_.find(id);
    if (it == routed_.end()) return false;
    const Routed to = it->second;
    routed_.erase(it);
    if (to.task != 0) {
      send_(to.task,
            data ? fmt::format("dmodex-data {} {}", to.id, hex_of(*data)) : fmt::format("dmodex-none {}", to.id));
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

bool PmixRelay::handle(int from_task, const std::string& body) {
  if (const auto get = parse(body, "dmodex-get")) {
    const auto rank = number_of(get->second);
    if (!rank || *rank > 0xffffffffull || !in_job(static_cast<std::uint32_t>(*rank))) return false;
    const int holder = holder_of(static_cast<std::uint32_t>(*rank));
    if (task_ == 0) {  // from a node that wants another node's rank
      if (holder == from_task || routed_.size() >= kMaxOpen) return false;
      route(from_task, get->first, static_cast<std::uint32_t>(*rank));
    } else {  // from the root: one of this node's ranks
      if (holder != task_ || from_task != 0) return false;
      serve(get->first, static_cast<std::uint32_t>(*rank));
    }
    return true;
  }
  if (const auto data = parse(body, "dmodex-data")) {
    auto bytes = bytes_of(data->second);
    return bytes && answer(data->first, std::move(bytes));
  }
  if (const auto none = parse(body, "dmodex-none")) return none->second.empty() && answer(none->first, std::nullopt);
  if (task_ == 0) {
    const auto part = parse(body, "fence");
    return part && take_part(from_task, part->first, std::string(part->second));
  }
  const auto whole = parse(body, "fenced");
  return whole && from_task == 0 && take_whole(whole->first, std::string(whole->second));
}

bool PmixRelay::take_part(int task, std::uint64_t number, const std::string& hex) {
  if (task <= 0 || task >= static_cast<int>(hosts_.size()) || number < completed_fences_ ||
      number >= completed_fences_ + kWindow)
    return false;
  auto part = bytes_of(hex);
  if (!part) return false;
  if (!fences_[number].parts.emplace(task, std::move(*part)).second) return false;  // a second part of one node
  complete_fences();
  return true;
}

bool PmixRelay::take_whole(std::uint64_t number, const std::string& hex) {
  const auto it = fences_.find(number);
  if (it == fences_.end() || !it->second.local) return false;  // the root completes only what every node gave
  auto all = bytes_of(hex);
  if (!all) return false;
  spdlog::debug("PMIx fence {}: complete, {} bytes", number, all->size());
  it->second.local->complete(std::move(*all));
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
    const std::string line = fmt::format("fenced {} {}", completed_fences_, hex_of(all));
    for (int task = 1; task < static_cast<int>(hosts_.size()); ++task) send_(task, line);
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
