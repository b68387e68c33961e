#include "hyrun/launcher/outer_identity.hpp"

#include <fmt/format.h>

#include <charconv>
#include <string_view>
#include <vector>

#include "hyrun/common/error.hpp"

extern char** environ;

namespace hyrun {
namespace {

std::string range_list(int first, int count) {
  std::string out;
  for (int i = 0; i < count; ++i) out += fmt::format("{}{}", i ? "," : "", first + i);
  return out;
}

int parse_count(std::string_view text, const std::string& list) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < 0)
    throw UsageError(fmt::format("'{}' is not a Slurm count list (such as 2(x3),1)", list));
  return value;
}

}  // namespace

std::string scale_slurm_counts(const std::string& list, int factor) {
  std::string out;
  for (std::string_view rest = list;;) {
    const auto comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    std::string repeat;
    if (const auto paren = item.find("(x"); paren != std::string_view::npos) {
      if (!item.ends_with(")")) throw UsageError(fmt::format("'{}' is not a Slurm count list (such as 2(x3),1)", list));
      repeat = fmt::format("(x{})", parse_count(item.substr(paren + 2, item.size() - paren - 3), list));
      item = item.substr(0, paren);
    }
    out += fmt::format("{}{}{}", out.empty() ? "" : ",", parse_count(item, list) * factor, repeat);
    if (comma == std::string_view::npos) return out;
    rest = rest.substr(comma + 1);
  }
}

OuterIdentity::OuterIdentity(Environment outer, int world_size, int ranks)
    : outer_(std::move(outer)), world_size_(world_size), ranks_(ranks) {}

OuterIdentity OuterIdentity::of_this_process(int world_size, int ranks) {
  Environment outer;
  for (char** e = environ; *e; ++e) {
    const std::string_view entry(*e);
    if (!entry.starts_with("SLURM_") && !entry.starts_with("OMPI_COMM_WORLD_")) continue;
    const auto eq = entry.find('=');
    if (eq != std::string_view::npos) outer.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return OuterIdentity(std::move(outer), world_size, ranks);
}

int OuterIdentity::number(const char* name, int otherwise) const {
  const auto it = outer_.find(name);
  if (it == outer_.end()) return otherwise;
  return parse_count(it->second, fmt::format("{}={}", name, it->second));
}

std::string OuterIdentity::pid_variable() const { return outer_.contains("SLURM_PROCID") ? "SLURM_TASK_PID" : ""; }

EnvironmentEntries OuterIdentity::for_rank(int rank, int local) const {
  EnvironmentEntries entries = slurm(rank, local);
  const auto mpi = open_mpi(rank, local);
  entries.insert(entries.end(), mpi.begin(), mpi.end());
  const std::size_t rewritten = entries.size();
  for (std::size_t i = 0; i < rewritten; ++i)
    if (const auto own = outer_.find(entries[i].first); own != outer_.end())
      entries.emplace_back(std::string(env::kOuterPrefix) + own->first, own->second);
  return entries;
}

// What srun gives a task of a step of world_size tasks, ranks_ of them on each of hyrun's
// tasks (srun's block distribution: a node's tasks are consecutive).
EnvironmentEntries OuterIdentity::slurm(int rank, int local) const {
  if (!outer_.contains("SLURM_PROCID")) return {};
  const std::string world = std::to_string(world_size_);
  EnvironmentEntries e{{"SLURM_PROCID", std::to_string(rank)},
                       {"SLURM_NTASKS", world},
                       {"SLURM_NPROCS", world},
                       {"SLURM_STEP_NUM_TASKS", world}};
  if (alone()) {
    e.insert(e.end(), {{"SLURM_LOCALID", std::to_string(local)},
                       {"SLURM_TASKS_PER_NODE", world},
                       {"SLURM_STEP_TASKS_PER_NODE", world},
                       {"SLURM_GTIDS", range_list(0, world_size_)}});
    return e;
  }
  e.emplace_back("SLURM_LOCALID", std::to_string(number("SLURM_LOCALID", 0) * ranks_ + local));
  for (const char* name : {"SLURM_TASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE"})
    if (const auto it = outer_.find(name); it != outer_.end())
      e.emplace_back(name, scale_slurm_counts(it->second, ranks_));
  if (const auto it = outer_.find("SLURM_GTIDS"); it != outer_.end()) {
    std::string gtids;
    for (std::string_view rest = it->second; !rest.empty();) {
      const auto comma = rest.find(',');
      const int task = parse_count(rest.substr(0, comma), "SLURM_GTIDS=" + it->second);
      gtids += (gtids.empty() ? "" : ",") + range_list(task * ranks_, ranks_);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    e.emplace_back("SLURM_GTIDS", gtids);
  }
  return e;
}

// What mpirun gives a process of a job of world_size processes.
EnvironmentEntries OuterIdentity::open_mpi(int rank, int local) const {
  if (!outer_.contains("OMPI_COMM_WORLD_RANK")) return {};
  const bool one = alone();
  const int local_rank = one ? local : number("OMPI_COMM_WORLD_LOCAL_RANK", 0) * ranks_ + local;
  const int local_size = one ? ranks_ : number("OMPI_COMM_WORLD_LOCAL_SIZE", 1) * ranks_;
  const int node_rank = one ? local : number("OMPI_COMM_WORLD_NODE_RANK", 0) * ranks_ + local;
  return {{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
          {"OMPI_COMM_WORLD_SIZE", std::to_string(world_size_)},
          {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(local_rank)},
          {"OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(local_size)},
          {"OMPI_COMM_WORLD_NODE_RANK", std::to_string(node_rank)}};
}

}  // namespace hyrun
