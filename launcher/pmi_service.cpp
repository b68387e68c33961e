#include "hyrun/launcher/pmi_service.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <variant>

#include "hyrun/common/error.hpp"
#include "hyrun/pmix/server.hpp"

namespace hyrun {
namespace {

constexpr std::size_t kReadChunk = 4096;
// A rank that sends requests without reading the answers is read no more until it does.
constexpr std::size_t kMaxUnread = 1 << 20;

std::string rc_reply(std::string_view command, bool ok, std::string_view why = {}) {
  if (ok) return format_pmi_reply(command, {{"rc", "0"}});
  return format_pmi_reply(command, {{"rc", "-1"}, {"msg", why}});
}

}  // namespace

PmiService::PmiService(JobLayout layout, int task, std::string kvsname)
    : layout_(std::move(layout)), task_(task), kvsname_(std::move(kvsname)), mapping_(process_mapping(layout_)) {}

PmiService::~PmiService() { *alive_ = false; }

std::string PmiService::process_mapping(const JobLayout& layout) {
  std::string mapping = "(vector";
  int next_rank = 0;
  for (int node = 0; node < layout.nodes();) {
    const auto ranks = layout.ranks_on_node(node);
    int same = 1;  // the nodes from this one on with as many ranks, each a block after the last
    for (int i = 0; i < static_cast<int>(ranks.size()); ++i)
      if (ranks[static_cast<std::size_t>(i)] != next_rank + i) return "";
    int end_rank = next_rank + static_cast<int>(ranks.size());
    while (node + same < layout.nodes()) {
      const auto more = layout.ranks_on_node(node + same);
      if (more.size() != ranks.size() || more.front() != end_rank ||
          more.back() != end_rank + static_cast<int>(more.size()) - 1)
        break;
      end_rank += static_cast<int>(more.size());
      ++same;
    }
    mapping += fmt::format(",({},{},{})", node, same, ranks.size());
    next_rank = end_rank;
    node += same;
  }
  return mapping + ")";
}

std::shared_ptr<UniqueFd> PmiService::open(int global_rank) {
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, ends) != 0)
    throw SystemError(fmt::format("a PMI socket for rank {}", global_rank), errno);
  auto child = std::make_shared<UniqueFd>(ends[1]);
  auto c = std::make_unique<Connection>();
  c->rank = global_rank;
  c->fd = UniqueFd(ends[0]);
  connections_.push_back(std::move(c));
  // The child's end is blocking, as a PMI client expects; only hyrun's end polls.
  const int flags = ::fcntl(child->get(), F_GETFL);
  if (flags >= 0) ::fcntl(child->get(), F_SETFL, flags & ~O_NONBLOCK);
  return child;
}

EnvironmentEntries PmiService::rank_variables(int global_rank) const {
  return {{"PMI_FD", std::to_string(kChildFd)},
          {"PMI_RANK", std::to_string(global_rank)},
          {"PMI_SIZE", std::to_string(layout_.world_size())}};
}

void PmiService::attach(RankSupervisor& supervisor) {
  supervisor_ = &supervisor;
  supervisor.add_participant(*this);
}

void PmiService::relay_to(CrossNodeRequests& relay) {
  relay_ = &relay;
  if (std::exchange(barrier_waits_for_relay_, false)) relay_barrier();
}

void PmiService::add_poll_fds(std::vector<pollfd>& fds) {
  for (const auto& c : connections_) {
    if (!c->fd) continue;
    short events = c->out.size() < kMaxUnread ? POLLIN : 0;
    if (!c->out.empty()) events |= POLLOUT;
    fds.push_back({c->fd.get(), events, 0});
  }
}

bool PmiService::on_poll(const pollfd& p) {
  const auto it = std::find_if(connections_.begin(), connections_.end(),
                               [&](const auto& c) { return c->fd && c->fd.get() == p.fd; });
  if (it == connections_.end()) return false;
  Connection& c = **it;
  if (p.revents & POLLOUT) flush(c);
  if (c.fd && (p.revents & (POLLIN | POLLHUP | POLLERR))) read_from(c);
  return true;
}

void PmiService::settle() {
  for (auto& c : connections_)
    if (c->fd) read_from(*c);
}

void PmiService::read_from(Connection& c) {
  char chunk[kReadChunk];
  for (;;) {
    const ssize_t n = ::read(c.fd.get(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {  // the process ended or closed it: nothing more to answer
      c.fd.reset();
      return;
    }
    c.in.append(chunk, static_cast<std::size_t>(n));
    take_requests(c);
    if (!c.fd || c.out.size() >= kMaxUnread) return;
  }
}

// Every whole request read so far: PMI-1 lines, then (once its init asked for it) PMI-2
// commands, each after its length field.
void PmiService::take_requests(Connection& c) {
  const std::string_view in = c.in;
  std::size_t start = 0;
  while (c.fd) {
    if (c.version == 2) {
      if (in.size() - start < kPmi2LengthField) break;
      const auto length = parse_pmi2_length(in.substr(start));
      if (const auto* why = std::get_if<std::string>(&length))
        return close(c, fmt::format("it sent something that is not PMI-2: {}", *why));
      const std::size_t size = std::get<std::size_t>(length);
      if (in.size() - start - kPmi2LengthField < size) break;
      const std::string_view body = in.substr(start + kPmi2LengthField, size);
      if (const auto request = taken(c, parse_pmi2_command(body), "PMI-2", body)) handle2(c, *request);
      start += kPmi2LengthField + size;
    } else {
      const std::size_t end = in.find('\n', start);
      if (end == std::string_view::npos) break;
      const std::string_view line = in.substr(start, end - start);
      if (const auto request = taken(c, parse_pmi_line(line), "PMI-1", line)) handle(c, *request);
      start = end + 1;
    }
  }
  if (!c.fd) return;
  c.in.erase(0, start);
  if (c.version == 1 && c.in.size() > kPmiMaxLine)
    close(c, fmt::format("a line of more than {} bytes (PMI-1's longest is a put of a {}-byte value)", kPmiMaxLine,
                         kPmiMaxValue));
}

// Why a rank's PMI socket is closed: said once, as the rank's; the rank's PMI calls fail from
// then on, and its end is the job's as any rank's.
void PmiService::close(Connection& c, const std::string& why) {
  spdlog::error("rank {}: its PMI socket is closed: {}", c.rank, why);
  c.fd.reset();
  c.in.clear();
  c.out.clear();
}

std::optional<PmiRequest> PmiService::taken(Connection& c, std::variant<PmiRequest, std::string> parsed,
                                            std::string_view protocol, std::string_view text) {
  if (const auto* why = std::get_if<std::string>(&parsed)) {
    close(c, fmt::format("it sent something that is not {} ({}): '{}'", protocol, *why, text.substr(0, 80)));
    return std::nullopt;
  }
  return std::move(std::get<PmiRequest>(parsed));
}

void PmiService::handle(Connection& c, const PmiRequest& request) {
  const std::string& cmd = request.command;
  if (cmd == "init") {
    const auto version = request.field("pmi_version");
    if (version != "1" && version != "2") {
      spdlog::error("rank {} asked for PMI version {}; hyrun serves PMI-1 and PMI-2 (docs/pmix.md)", c.rank,
                    version.value_or("(none)").substr(0, 16));
      return reply(c,
                   format_pmi_reply("response_to_init", {{"pmi_version", "1"}, {"pmi_subversion", "1"}, {"rc", "-1"}}));
    }
    if (version == "2") {  // what follows is PMI-2; its fullinit says the client is in
      c.version = 2;
      return reply(c,
                   format_pmi_reply("response_to_init", {{"pmi_version", "2"}, {"pmi_subversion", "0"}, {"rc", "0"}}));
    }
    if (supervisor_ != nullptr) supervisor_->on_pmix_client(c.rank, RankSupervisor::PmixClientStep::kConnected, "PMI");
    return reply(c, format_pmi_reply("response_to_init", {{"pmi_version", "1"}, {"pmi_subversion", "1"}, {"rc", "0"}}));
  }
  if (cmd == "get_maxes")
    return reply(c, format_pmi_reply("maxes", {{"kvsname_max", std::to_string(kPmiMaxKvsName)},
                                               {"keylen_max", std::to_string(kPmiMaxKey)},
                                               {"vallen_max", std::to_string(kPmiMaxValue)},
                                               {"rc", "0"}}));
  if (cmd == "get_appnum") return reply(c, format_pmi_reply("appnum", {{"appnum", "0"}, {"rc", "0"}}));
  if (cmd == "get_my_kvsname") return reply(c, format_pmi_reply("my_kvsname", {{"kvsname", kvsname_}, {"rc", "0"}}));
  if (cmd == "get_universe_size")
    return reply(c, format_pmi_reply("universe_size", {{"size", std::to_string(layout_.world_size())}, {"rc", "0"}}));
  if (cmd == "put") return put(c, request);
  if (cmd == "get") return get(c, request);
  if (cmd == "barrier_in") return barrier_in(c);
  if (cmd == "finalize") {
    if (supervisor_ != nullptr) supervisor_->on_pmix_client(c.rank, RankSupervisor::PmixClientStep::kFinalized, "PMI");
    return reply(c, format_pmi_reply("finalize_ack", {{"rc", "0"}}));
  }
  if (cmd == "abort") {
    int status = 1;
    if (const auto code = request.field("exitcode")) std::from_chars(code->data(), code->data() + code->size(), status);
    if (supervisor_ != nullptr) supervisor_->on_pmix_abort(c.rank, status, "", "PMI");
    return;  // the client exits; the job ends with its status
  }
  spdlog::warn("rank {} sent the PMI command '{}', which hyrun does not serve (docs/pmix.md)", c.rank,
               cmd.substr(0, 64));
  reply(c, rc_reply(cmd, false, "not_served_by_hyrun"));
}

std::string PmiService::store(std::string_view key, std::string_view value, int rank) {
  // A key or value is one line of the relay's part ("key=value\n"): PMI-2 could carry a newline.
  if (key.empty() || key.size() > kPmiMaxKey || key.find_first_of("=\n") != std::string_view::npos)
    return "key_missing_or_too_long";
  if (value.size() > kPmiMaxValue || value.find('\n') != std::string_view::npos) return "value_missing_or_too_long";
  if (bytes_ + key.size() + value.size() > kMaxBytes) {
    spdlog::error("rank {}: a PMI put past the {} MiB that hyrun keeps for the job's puts is refused", rank,
                  kMaxBytes >> 20);
    return "no_room_left";
  }
  bytes_ += key.size() + value.size();
  values_.insert_or_assign(std::string(key), std::string(value));
  if (layout_.tasks() > 1) part_ += fmt::format("{}={}\n", key, value);
  return "";
}

void PmiService::put(Connection& c, const PmiRequest& request) {
  const auto key = request.field("key"), value = request.field("value");
  std::string why;
  if (request.field("kvsname") != kvsname_)
    why = "no_such_kvsname";
  else if (!value)
    why = "value_missing_or_too_long";
  else
    why = store(key.value_or(""), *value, c.rank);
  reply(c, rc_reply("put_result", why.empty(), why));
}

void PmiService::get(Connection& c, const PmiRequest& request) {
  const auto key = request.field("key");
  if (request.field("kvsname") != kvsname_ || !key)
    return reply(c, rc_reply("get_result", false, "no_such_kvsname_or_key"));
  if (*key == "PMI_process_mapping" && !mapping_.empty())
    return reply(c, format_pmi_reply("get_result", {{"rc", "0"}, {"value", mapping_}}));
  const auto it = values_.find(*key);
  if (it == values_.end()) return reply(c, rc_reply("get_result", false, "key_not_found"));
  reply(c, format_pmi_reply("get_result", {{"rc", "0"}, {"value", it->second}}));
}

void PmiService::barrier_in(Connection& c) {
  c.in_barrier = true;
  const auto in = std::count_if(connections_.begin(), connections_.end(), [](const auto& x) { return x->in_barrier; });
  if (in < layout_.task(task_).ranks) return;
  if (layout_.tasks() == 1) return end_barrier(true, {});
  if (relay_ == nullptr) {  // the node link is not up yet: the barrier goes when it is
    barrier_waits_for_relay_ = true;
    return;
  }
  relay_barrier();
}

// This node's puts since the last barrier go to every node; the fence brings every node's.
void PmiService::relay_barrier() {
  auto request = std::make_shared<pmix::PendingRequest>(
      std::exchange(part_, {}), [this, alive = alive_](pmix::PendingRequest::Outcome outcome, std::string joined) {
        if (*alive) end_barrier(outcome == pmix::PendingRequest::Outcome::kDone, joined);
      });
  relay_->fence(std::move(request));
}

void PmiService::end_barrier(bool ok, std::string_view joined) {
  for (std::size_t start = 0; start < joined.size();) {  // every node's puts, this node's too
    std::size_t end = joined.find('\n', start);
    if (end == std::string_view::npos) end = joined.size();
    const std::string_view line = joined.substr(start, end - start);
    if (const std::size_t equals = line.find('='); equals != std::string_view::npos)
      values_.insert_or_assign(std::string(line.substr(0, equals)), std::string(line.substr(equals + 1)));
    start = end + 1;
  }
  if (!ok) spdlog::error("a PMI barrier across nodes failed: the ranks' PMI_Barrier fails");
  for (auto& c : connections_) {
    if (!std::exchange(c->in_barrier, false) || !c->fd) continue;
    if (c->version == 1) {
      reply(*c, rc_reply("barrier_out", ok, "barrier_failed"));
    } else {
      PmiRequest fence;
      if (!c->fence_thrid.empty()) fence.fields.emplace("thrid", c->fence_thrid);
      if (ok)
        reply2(*c, fence, "kvs-fence-response", {{"rc", "0"}});
      else
        reply2(*c, fence, "kvs-fence-response", {{"rc", "-1"}, {"errmsg", "a fence across nodes failed"}});
    }
  }
}

void PmiService::reply(Connection& c, std::string line) {
  c.out += line;
  flush(c);
}

void PmiService::flush(Connection& c) {
  while (c.fd && !c.out.empty()) {
    const ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n < 0) {  // the process is gone
      c.fd.reset();
      c.out.clear();
      return;
    }
    c.out.erase(0, static_cast<std::size_t>(n));
  }
}

}  // namespace hyrun
