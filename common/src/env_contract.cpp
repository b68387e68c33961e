#include "hyrun/common/env_contract.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "hyrun/common/error.hpp"

namespace hyrun {
namespace {

const char* lookup(const char* name) {
  const char* value = std::getenv(name);
  return (value && *value) ? value : nullptr;
}

int parse_int(const char* name, const char* text, int min_value) {
  int value = 0;
  const char* end = text + std::char_traits<char>::length(text);
  const auto [ptr, ec] = std::from_chars(text, end, value);
  if (ec != std::errc{} || ptr != end || value < min_value)
    throw UsageError(fmt::format("{}='{}' is not valid: expected an integer >= {}", name, text, min_value));
  return value;
}

int required_int(const char* name, int min_value) {
  const char* text = lookup(name);
  if (!text) throw Error(fmt::format("not started by hyrun: {} is not set", name));
  return parse_int(name, text, min_value);
}

constexpr std::string_view kPublishPrefix = "hyrun-root v1 ";
constexpr std::string_view kHelloLine = "hyrun-hello v1";

}  // namespace

std::vector<std::pair<std::string, std::string>> RankEnvironment::to_variables() const {
  std::vector<std::pair<std::string, std::string>> vars = {
      {env::kRank, std::to_string(rank)},
      {env::kWorldSize, std::to_string(world_size)},
      {env::kLocalRank, std::to_string(local_rank)},
      {env::kLocalWorldSize, std::to_string(local_world_size)},
      {env::kNodeRank, std::to_string(node_rank)},
      {env::kNumNodes, std::to_string(num_nodes)},
      {env::kBootstrapTimeoutMs, std::to_string(bootstrap_timeout_ms)},
      {env::kIncarnation, std::to_string(incarnation)},
      {env::kCommonRank, std::to_string(rank)},
      {env::kCommonWorldSize, std::to_string(world_size)},
      {env::kCommonLocalRank, std::to_string(local_rank)},
      {env::kCommonLocalWorldSize, std::to_string(local_world_size)},
      {env::kGroupRank, std::to_string(node_rank)},
      {env::kGroupWorldSize, std::to_string(num_nodes)},
      {env::kRoleRank, std::to_string(rank)},
      {env::kRoleWorldSize, std::to_string(world_size)},
      {env::kRoleName, "default"},
      {env::kRestartCount, std::to_string(incarnation)},
      {env::kMaxRestarts, "0"},
  };
  if (!job_token.empty()) vars.emplace_back(env::kJobToken, job_token);
  if (root_address_hex) vars.emplace_back(env::kRootAddress, *root_address_hex);
  if (!root_pending_dir.empty()) vars.emplace_back(env::kRootPending, root_pending_dir);
  if (publish_fd) vars.emplace_back(env::kPublishFd, std::to_string(*publish_fd));
  if (control_fd) vars.emplace_back(env::kControlFd, std::to_string(*control_fd));
  if (output_terminal) vars.emplace_back(env::kOutputTerminal, "1");
  if (!start_ranks.empty()) vars.emplace_back(env::kStartRanks, fmt::format("{}", fmt::join(start_ranks, ",")));
  return vars;
}

std::vector<std::pair<std::string, std::string>> RankEnvironment::default_variables() const {
  std::vector<std::pair<std::string, std::string>> vars;
  if (!master_addr.empty()) vars.emplace_back(env::kMasterAddr, master_addr);
  if (master_port) vars.emplace_back(env::kMasterPort, std::to_string(*master_port));
  if (!run_id.empty()) vars.emplace_back(env::kRunId, run_id);
  return vars;
}

RankEnvironment RankEnvironment::from_environment() {
  if (!lookup(env::kRank)) throw Error(fmt::format("not started by hyrun: {} is not set", env::kRank));
  RankEnvironment e;
  e.rank = required_int(env::kRank, 0);
  e.world_size = required_int(env::kWorldSize, 1);
  e.local_rank = required_int(env::kLocalRank, 0);
  e.local_world_size = required_int(env::kLocalWorldSize, 1);
  e.node_rank = required_int(env::kNodeRank, 0);
  e.num_nodes = required_int(env::kNumNodes, 1);
  e.bootstrap_timeout_ms = required_int(env::kBootstrapTimeoutMs, 1);
  if (const char* pending = lookup(env::kRootPending)) e.root_pending_dir = pending;
  const char* token = lookup(env::kJobToken);
  if (token) e.job_token = token;
  if (!token && e.root_pending_dir.empty())
    throw Error(fmt::format("not started by hyrun: {} is not set", env::kJobToken));
  if (const char* addr = lookup(env::kRootAddress)) e.root_address_hex = addr;
  if (const char* fd = lookup(env::kPublishFd)) e.publish_fd = parse_int(env::kPublishFd, fd, 0);
  if (const char* fd = lookup(env::kControlFd)) e.control_fd = parse_int(env::kControlFd, fd, 0);
  if (const char* k = lookup(env::kIncarnation)) e.incarnation = parse_int(env::kIncarnation, k, 0);
  if (const char* t = lookup(env::kOutputTerminal)) e.output_terminal = std::string_view(t) == "1";

  if (const char* list = lookup(env::kStartRanks)) {
    std::string_view rest = list;
    for (;;) {
      const auto comma = rest.find(',');
      const std::string item(rest.substr(0, comma));
      const int r = parse_int(env::kStartRanks, item.c_str(), 0);
      if (r >= e.world_size || (!e.start_ranks.empty() && r <= e.start_ranks.back()))
        throw UsageError(fmt::format("{}='{}' is not valid: expected ascending ranks below {}={}, such as 0,1,3",
                                     env::kStartRanks, list, env::kWorldSize, e.world_size));
      e.start_ranks.push_back(r);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    if (e.start_ranks.front() != 0)
      throw UsageError(
          fmt::format("{}='{}' is not valid: rank 0 starts the World and must be listed", env::kStartRanks, list));
  }
  if (e.rank >= e.world_size)
    throw UsageError(
        fmt::format("{}={} is outside the world: {}={}", env::kRank, e.rank, env::kWorldSize, e.world_size));
  if (e.local_rank >= e.local_world_size)
    throw UsageError(
        fmt::format("{}={} is outside {}={}", env::kLocalRank, e.local_rank, env::kLocalWorldSize, e.local_world_size));
  if (e.node_rank >= e.num_nodes)
    throw UsageError(fmt::format("{}={} is outside {}={}", env::kNodeRank, e.node_rank, env::kNumNodes, e.num_nodes));
  return e;
}

bool RankEnvironment::joins_late() const {
  if (incarnation > 0) return true;
  return !start_ranks.empty() && !std::binary_search(start_ranks.begin(), start_ranks.end(), rank);
}

std::string format_publish_line(const std::string& address_hex) {
  return std::string(kPublishPrefix) + address_hex + "\n";
}

std::optional<std::string> parse_publish_line(const std::string& line) {
  if (!line.starts_with(kPublishPrefix)) return std::nullopt;
  std::string hex = line.substr(kPublishPrefix.size());
  if (hex.empty() || hex.size() % 2 != 0) return std::nullopt;
  for (char c : hex)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
  return hex;
}

std::string format_hello_line() { return std::string(kHelloLine) + "\n"; }

bool is_hello_line(const std::string& line) { return line == kHelloLine; }

}  // namespace hyrun
