#include "hyrun/ep/plan/elastic_plan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "hyrun/common/error.hpp"

namespace hyrun {
namespace {

constexpr int kCoordinatorRank = 0;

std::string brief(const nlohmann::json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

// JSON reads "-0" as 0, so a request to kill rank 0 would silently become "rank 0 active".
// Find it in the text (outside strings) to say so instead.
void reject_negative_zero(std::string_view text, std::string_view source) {
  int depth = 0;
  int phase = 0;
  int position = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '[':
        ++depth;
        if (depth == 2) position = 0;
        break;
      case ']': --depth; break;
      case ',':
        if (depth == 1) ++phase;
        if (depth == 2) ++position;
        break;
      case '-': {
        const bool zero = i + 1 < text.size() && text[i + 1] == '0';
        const bool more =
            i + 2 < text.size() && std::string_view("0123456789.eE").find(text[i + 2]) != std::string_view::npos;
        if (depth == 2 && zero && !more) {
          throw UsageError(fmt::format(
              "{}: plan phase {} (0-based), position {}: -0 asks to kill rank 0, but rank 0 hosts the coordinator "
              "and cannot be killed (JSON also reads -0 as 0); keep 0 in every phase and kill another rank",
              source, phase, position));
        }
        break;
      }
      default: break;
    }
  }
}

std::vector<int> sorted(std::set<int> values) { return {values.begin(), values.end()}; }

bool contains(const std::vector<int>& sorted_values, int value) {
  return std::binary_search(sorted_values.begin(), sorted_values.end(), value);
}

nlohmann::json parse_document(std::string_view json_text, std::string_view source) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json_text.begin(), json_text.end());
  } catch (const nlohmann::json::parse_error& e) {
    throw UsageError(
        fmt::format("{}: plan must be valid JSON: {}; write a list of phases such as [[0,1,2,3],[0,1,2,3,4,5,6,7]]",
                    source, e.what()));
  }
  if (!doc.is_array() || doc.empty()) {
    throw UsageError(fmt::format(
        "{}: plan must decode to a non-empty list of phases, got {}; write e.g. [[0,1,2,3],[0,1,2,3,4,5,6,7]]", source,
        brief(doc)));
  }
  return doc;
}

/// The rank at position `i` of plan phase `p`: an integer within int's range.
int rank_entry(const nlohmann::json& v, std::size_t p, std::size_t i, std::string_view source) {
  const bool integer = v.is_number_integer();
  const bool in_range =
      integer && (v.is_number_unsigned() ? v.get<std::uint64_t>() <= INT_MAX
                                         : v.get<std::int64_t>() >= -INT_MAX && v.get<std::int64_t>() <= INT_MAX);
  if (!integer) {
    throw UsageError(
        fmt::format("{}: plan phase {} (0-based), position {}: {} is not an integer rank; each plan rank "
                    "must be an integer (negative = killed in that phase)",
                    source, p, i, brief(v)));
  }
  if (!in_range) {
    throw UsageError(
        fmt::format("{}: plan phase {} (0-based), position {}: {} is too large for a rank", source, p, i, brief(v)));
  }
  return v.get<int>();
}

/// The structure: every phase a non-empty list of integers.
std::vector<std::vector<int>> rank_entries(const nlohmann::json& doc, std::string_view source) {
  std::vector<std::vector<int>> entries;
  for (std::size_t p = 0; p < doc.size(); ++p) {
    const auto& phase = doc[p];
    if (!phase.is_array() || phase.empty()) {
      throw UsageError(
          fmt::format("{}: each plan phase must be a non-empty list of ranks: plan phase {} (0-based) is {}", source, p,
                      brief(phase)));
    }
    auto& row = entries.emplace_back();
    for (std::size_t i = 0; i < phase.size(); ++i) row.push_back(rank_entry(phase[i], p, i, source));
  }
  return entries;
}

/// The ranks one phase lists (active) and those it kills.
struct PhaseRanks {
  std::set<int> active;
  std::set<int> killed;
};

/// Phase `p`'s ranks, checked: inside the world, each once, a killed one running in the
/// phase before, rank 0 (the coordinator) always active.
PhaseRanks phase_ranks(const std::vector<int>& row, std::size_t p, int world_size, int max_rank,
                       const std::set<int>& prev_survivors, std::string_view source) {
  std::map<int, std::size_t> first_position;
  PhaseRanks ranks;
  for (std::size_t i = 0; i < row.size(); ++i) {
    const int r = std::abs(row[i]);
    if (world_size > 0 && r >= world_size) {
      throw UsageError(
          fmt::format("{}: rank {} in plan phase {} (0-based) is outside the world of {} ranks started by hyrun "
                      "(hyrun -n {}); start at least {} ranks or remove it",
                      source, r, p, world_size, world_size, max_rank + 1));
    }
    if (auto [it, fresh] = first_position.emplace(r, i); !fresh) {
      throw UsageError(
          fmt::format("{}: plan phase {} (0-based) lists rank {} twice (as {} at position {} and {} at position {}); "
                      "list each rank once (negative = killed)",
                      source, p, r, row[it->second], it->second, row[i], i));
    }
    ranks.active.insert(r);
    if (row[i] >= 0) continue;
    if (p == 0) {
      throw UsageError(
          fmt::format("{}: plan phase 0, position {}: {} kills rank {} in the first phase, but no rank is running "
                      "before it; only a rank active in the previous phase can be killed",
                      source, i, row[i], r));
    }
    if (!prev_survivors.contains(r)) {
      throw UsageError(
          fmt::format("{}: plan phase {} (0-based), position {}: {} kills rank {}, but rank {} is not running in "
                      "phase {} (absent or killed there); only a rank active in the previous phase can be killed",
                      source, p, i, row[i], r, r, p - 1));
    }
    ranks.killed.insert(r);
  }
  if (!ranks.active.contains(kCoordinatorRank)) {
    throw UsageError(
        fmt::format("{}: plan phase {} (0-based) is {} and does not list rank 0; rank 0 hosts the coordinator and "
                    "must be active in every phase (it cannot be killed or leave)",
                    source, p, nlohmann::json(row).dump()));
  }
  return ranks;
}

/// What a phase means against the one before: who joins, leaves, survives, and who needs a
/// new process (active before, gone, back now).
PlanPhase derive_phase(const std::vector<int>& row, const PhaseRanks& ranks, const std::set<int>& prev_survivors,
                       const std::set<int>& ever_active) {
  PlanPhase phase;
  phase.entries = row;
  phase.active = sorted(ranks.active);
  phase.killed = sorted(ranks.killed);
  std::set<int> survivors;
  for (int r : ranks.active) {
    if (!ranks.killed.contains(r)) survivors.insert(r);
    if (!prev_survivors.contains(r)) {
      phase.joining.push_back(r);
      if (ever_active.contains(r)) phase.new_processes.push_back(r);
    }
  }
  for (int r : prev_survivors)
    if (!ranks.active.contains(r)) phase.leaving.push_back(r);
  phase.survivors = sorted(survivors);
  return phase;
}

}  // namespace

std::string_view to_string(PhaseRole role) {
  switch (role) {
    case PhaseRole::kIdle: return "idle";
    case PhaseRole::kActive: return "active";
    case PhaseRole::kJoined: return "joined";
    case PhaseRole::kKilled: return "killed";
    case PhaseRole::kLeft: return "left";
  }
  return "unknown";
}

ElasticPlan ElasticPlan::parse(std::string_view json_text, int world_size, std::string_view source) {
  const std::vector<std::vector<int>> entries = rank_entries(parse_document(json_text, source), source);
  reject_negative_zero(json_text, source);

  ElasticPlan plan;
  plan.source_ = std::string(source);
  plan.world_size_ = world_size;
  for (const auto& row : entries)
    for (int r : row) plan.max_rank_ = std::max(plan.max_rank_, std::abs(r));

  std::set<int> prev_survivors;
  std::set<int> ever_active;
  for (std::size_t p = 0; p < entries.size(); ++p) {
    const PhaseRanks ranks = phase_ranks(entries[p], p, world_size, plan.max_rank_, prev_survivors, source);
    PlanPhase phase = derive_phase(entries[p], ranks, prev_survivors, ever_active);
    ever_active.insert(ranks.active.begin(), ranks.active.end());
    prev_survivors = std::set<int>(phase.survivors.begin(), phase.survivors.end());
    plan.phases_.push_back(std::move(phase));
  }
  return plan;
}

ElasticPlan ElasticPlan::from_option(const std::string& value, int world_size) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(value, ec)) {
    std::ifstream in(value, std::ios::binary);
    if (!in) throw UsageError(fmt::format("--plan file '{}' exists but cannot be read; check its permissions", value));
    std::ostringstream text;
    text << in.rdbuf();
    return parse(text.str(), world_size, fmt::format("--plan file '{}'", value));
  }
  const auto first = value.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || value[first] != '[') {
    throw UsageError(
        fmt::format("--plan '{}' is neither an existing file nor JSON text (a plan starts with '['); give a plan "
                    "file path or a list of phases such as [[0,1,2,3],[0,1,2,3,4,5,6,7]]",
                    value));
  }
  return parse(value, world_size, "--plan JSON text");
}

const PlanPhase& ElasticPlan::phase(std::size_t p) const {
  if (p >= phases_.size())
    throw UsageError(
        fmt::format("{}: phase {} (0-based) requested, but the plan has {} phases", source_, p, phases_.size()));
  return phases_[p];
}

std::vector<int> ElasticPlan::unused_ranks() const {
  std::vector<int> unused;
  for (int r = 0; r < world_size_; ++r) {
    const bool used =
        std::any_of(phases_.begin(), phases_.end(), [r](const PlanPhase& ph) { return contains(ph.active, r); });
    if (!used) unused.push_back(r);
  }
  return unused;
}

PhaseRole ElasticPlan::role(std::size_t p, int rank) const {
  const PlanPhase& ph = phase(p);
  if (contains(ph.killed, rank)) return PhaseRole::kKilled;
  if (contains(ph.joining, rank)) return PhaseRole::kJoined;
  if (contains(ph.active, rank)) return PhaseRole::kActive;
  if (contains(ph.leaving, rank)) return PhaseRole::kLeft;
  return PhaseRole::kIdle;
}

bool ElasticPlan::is_active(std::size_t p, int rank) const { return contains(phase(p).active, rank); }

bool ElasticPlan::needs_new_process(std::size_t p, int rank) const { return contains(phase(p).new_processes, rank); }

int ElasticPlan::incarnation(std::size_t p, int rank) const {
  if (!is_active(p, rank)) return -1;
  int restarts = 0;
  for (std::size_t q = 0; q <= p; ++q)
    if (contains(phases_[q].new_processes, rank)) ++restarts;
  return restarts;
}

std::string ElasticPlan::to_json() const {
  nlohmann::json doc = nlohmann::json::array();
  for (const auto& ph : phases_) doc.push_back(ph.entries);
  return doc.dump();
}

}  // namespace hyrun
