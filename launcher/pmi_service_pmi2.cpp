// PmiService's PMI-2 requests (pmi_service.hpp): what a rank asks once its init chose PMI-2,
// answered as Slurm's mpi/pmi2 plugin and hydra answer them. The key-value space, the
// fences and the rank's lifecycle are PMI-1's (pmi_service.cpp).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <variant>

#include "hyrun/launcher/pmi_service.hpp"

namespace hyrun {

void PmiService::handle2(Connection& c, const PmiRequest& request) {
  const std::string& cmd = request.command;
  if (cmd == "fullinit") {
    if (supervisor_ != nullptr) supervisor_->on_pmix_client(c.rank, RankSupervisor::PmixClientStep::kConnected, "PMI");
    const std::string rank = std::to_string(c.rank), size = std::to_string(layout_.world_size());
    return reply2(c, request, "fullinit-response",
                  {{"rc", "0"},
                   {"pmi-version", "2"},
                   {"pmi-subversion", "0"},
                   {"rank", rank},
                   {"size", size},
                   {"appnum", "0"},
                   {"debugged", "FALSE"},
                   {"pmiverbose", "FALSE"}});
  }
  if (cmd == "job-getid") return reply2(c, request, "job-getid-response", {{"rc", "0"}, {"jobid", kvsname_}});
  if (cmd == "info-getjobattr") {
    const auto key = request.field("key");
    const std::string universe = std::to_string(layout_.world_size());
    std::string_view value;
    if (key == "PMI_process_mapping") value = mapping_;
    if (key == "universeSize") value = universe;
    if (value.empty()) return reply2(c, request, "info-getjobattr-response", {{"rc", "0"}, {"found", "FALSE"}});
    return reply2(c, request, "info-getjobattr-response", {{"rc", "0"}, {"found", "TRUE"}, {"value", value}});
  }
  if (cmd == "info-putnodeattr" || cmd == "info-getnodeattr") return node_attribute(c, request);
  if (cmd == "kvs-put") {
    const std::string why = store(request.field("key").value_or(""), request.field("value").value_or(""), c.rank);
    if (why.empty()) return reply2(c, request, "kvs-put-response", {{"rc", "0"}});
    return reply2(c, request, "kvs-put-response", {{"rc", "-1"}, {"errmsg", why}});
  }
  if (cmd == "kvs-get") {
    const auto it = values_.find(request.field("key").value_or(""));
    if (it == values_.end()) return reply2(c, request, "kvs-get-response", {{"rc", "0"}, {"found", "FALSE"}});
    return reply2(c, request, "kvs-get-response", {{"rc", "0"}, {"found", "TRUE"}, {"value", it->second}});
  }
  if (cmd == "kvs-fence") {
    c.fence_thrid = std::string(request.field("thrid").value_or(""));
    return barrier_in(c);
  }
  if (cmd == "finalize") {
    if (supervisor_ != nullptr) supervisor_->on_pmix_client(c.rank, RankSupervisor::PmixClientStep::kFinalized, "PMI");
    return reply2(c, request, "finalize-response", {{"rc", "0"}});
  }
  if (cmd == "abort") {
    // PMI-2's abort carries no status: the client exits with 1 (isworld) right after it.
    // Its message goes on one line of hyrun's, so no control character of the rank's reaches it.
    std::string message(request.field("msg").value_or("").substr(0, 256));
    std::replace_if(
        message.begin(), message.end(), [](char ch) { return static_cast<unsigned char>(ch) < 0x20; }, ' ');
    if (supervisor_ != nullptr) supervisor_->on_pmix_abort(c.rank, 1, message, "PMI2");
    return;
  }
  spdlog::warn("rank {} sent the PMI-2 command '{}', which hyrun does not serve (docs/pmix.md)", c.rank,
               cmd.substr(0, 64));
  reply2(c, request, cmd + "-response", {{"rc", "-1"}, {"errmsg", "not served by hyrun"}});
}

// PMI-2's node attributes: a key-value space of this node's ranks, read at once or, with
// wait=TRUE, once some rank of the node puts it.
void PmiService::node_attribute(Connection& c, const PmiRequest& request) {
  const std::string key(request.field("key").value_or(""));
  if (request.command == "info-putnodeattr") {
    const auto value = request.field("value");
    if (key.empty() || key.size() > kPmi2MaxKey || !value)
      return reply2(c, request, "info-putnodeattr-response", {{"rc", "-1"}, {"errmsg", "key or value missing"}});
    if (bytes_ + key.size() + value->size() > kMaxBytes)
      return reply2(c, request, "info-putnodeattr-response", {{"rc", "-1"}, {"errmsg", "no room left"}});
    bytes_ += key.size() + value->size();
    const std::string& kept = node_attributes_.insert_or_assign(key, std::string(*value)).first->second;
    reply2(c, request, "info-putnodeattr-response", {{"rc", "0"}});
    for (auto& waiting : connections_) {
      if (!waiting->fd || waiting->awaited_attr != key) continue;
      waiting->awaited_attr.reset();
      PmiRequest asked;
      if (!waiting->attr_thrid.empty()) asked.fields.emplace("thrid", waiting->attr_thrid);
      reply2(*waiting, asked, "info-getnodeattr-response", {{"rc", "0"}, {"found", "TRUE"}, {"value", kept}});
    }
    return;
  }
  const auto it = node_attributes_.find(key);
  if (it != node_attributes_.end())
    return reply2(c, request, "info-getnodeattr-response", {{"rc", "0"}, {"found", "TRUE"}, {"value", it->second}});
  if (request.field("wait") != "TRUE")
    return reply2(c, request, "info-getnodeattr-response", {{"rc", "0"}, {"found", "FALSE"}});
  c.awaited_attr = key;  // answered by the put
  c.attr_thrid = std::string(request.field("thrid").value_or(""));
}

// A threaded MPICH names the requesting thread (thrid): the reply names it back.
void PmiService::reply2(Connection& c, const PmiRequest& request, std::string_view command,
                        std::vector<std::pair<std::string_view, std::string_view>> fields) {
  if (const auto thrid = request.field("thrid")) fields.emplace_back("thrid", *thrid);
  reply(c, format_pmi2_reply(command, fields));
}

}  // namespace hyrun
