// The --report-bindings output of a BindingPlan: a table for people, JSON for tools.
#include <algorithm>
#include <string>
#include <vector>

#include "hyrun/binding/binding_plan.hpp"
#include "hyrun/binding/cpu_list.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace hyrun::binding {
namespace {

std::string or_dash(const std::string& s) { return s.empty() ? "-" : s; }

}  // namespace

std::string BindingPlan::report_table(int rank_offset) const {
  const std::vector<std::string> header{"RANK", "LOCAL", "GPU", "PCI BUS ID", "CPUS", "NUMA", "NIC", "REASON"};
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : ranks_) {
    std::vector<std::string> gpu_ids, bus_ids;
    for (const auto& g : p.gpus) {
      gpu_ids.push_back(std::to_string(g.index));
      bus_ids.push_back(g.pci_bus_id);
    }
    std::string reason = p.reason;
    for (const auto& note : p.notes) reason += "; note: " + note;
    rows.push_back({std::to_string(rank_offset + p.local_rank), std::to_string(p.local_rank),
                    or_dash(fmt::format("{}", fmt::join(gpu_ids, ","))),
                    or_dash(fmt::format("{}", fmt::join(bus_ids, ","))),
                    p.cpus.empty() ? "unbound" : format_cpu_list(p.cpus),
                    or_dash(format_cpu_list(p.numa_nodes)) + (p.mem_bind || p.numa_nodes.empty() ? "" : " (not bound)"),
                    p.nic_source == "user-set" ? fmt::format("{}", fmt::join(p.nics, ",")) + " (user-set)"
                                               : or_dash(fmt::format("{}", fmt::join(p.nics, ","))),
                    reason});
  }
  std::vector<std::size_t> width(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& r : rows) width[c] = std::max(width[c], r[c].size());
  }
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      out += cells[c];
      if (c + 1 < cells.size()) out += std::string(width[c] - cells[c].size() + 2, ' ');
    }
    return out + "\n";
  };
  std::string out = "hyrun bindings (topology: " + topology_description_ + ")\n" + line(header);
  for (const auto& r : rows) out += line(r);
  return out;
}

nlohmann::json BindingPlan::report_json(int rank_offset) const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& p : ranks_) {
    nlohmann::json gpus = nlohmann::json::array();
    for (const auto& g : p.gpus) {
      nlohmann::json j{{"index", g.index}, {"pci_bus_id", g.pci_bus_id}, {"visible_id", g.visible_id}};
      if (!g.uuid.empty()) j["uuid"] = g.uuid;
      gpus.push_back(std::move(j));
    }
    nlohmann::json env = nlohmann::json::object();
    for (const auto& [name, value] : p.environment) env[name] = value;
    out.push_back({{"rank", rank_offset + p.local_rank},
                   {"local_rank", p.local_rank},
                   {"gpus", std::move(gpus)},
                   {"cpus", p.cpus},
                   {"cpu_list", format_cpu_list(p.cpus)},
                   {"cpu_policy", p.cpu_policy},
                   {"numa_nodes", p.numa_nodes},
                   {"mem_bind", p.mem_bind},
                   {"nics", p.nics},
                   {"nic_source", p.nic_source},
                   {"reason", p.reason},
                   {"notes", p.notes},
                   {"environment", std::move(env)},
                   {"topology", topology_description_},
                   {"this_system", this_system_}});
  }
  return out;
}

}  // namespace hyrun::binding
