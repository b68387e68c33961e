#pragma once
// `--timings`: when each step of a node's launch was done, in milliseconds from hyrun's
// main (mark_process_start), for finding where a launch's time goes (docs/performance.md).
// Each hyrun prints its own line when its job ends, on stderr:
//   hyrun: timings on HOST (task T of N), ms: launch 8.0, plan 30.1, rank 0 started 36.0, ...
// "launch" is when the launch sequence began: the command line is parsed and, under srun
// or mpirun, PMIx is initialised.
// Steps are said in the order they were done; a step not reached is not in the line.
// In hybrid mode the line goes on with what the launch cost the node (costs()): CPU time of
// hyrun and of its PMIx client helper, bytes on the node link, fences across nodes:
//   ...; cost: CPU ms hyrun 41.2, helper 3.0; node link bytes sent 2210, received 1932;
//   fences 2, parts 1540 bytes
// and the root prints one more line, the maximum and the median over the nodes that told it
// theirs (summary()).
#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hyrun/link/link_message.hpp"

namespace hyrun {

/// CPU time used so far, in microseconds: this process's (every thread's), and another
/// process's of this user (nullopt when it cannot be read, e.g. gone).
std::uint64_t own_cpu_us();
std::optional<std::uint64_t> process_cpu_us(pid_t pid);

class LaunchTimings {
 public:
  using Clock = std::chrono::steady_clock;

  /// Call first thing in main: the origin of every time said.
  static void mark_process_start() { origin() = Clock::now(); }

  /// Nothing is kept or printed unless `enabled`. Marks "launch".
  LaunchTimings(bool enabled, std::string host, int task, int tasks)
      : enabled_(enabled), host_(std::move(host)), task_(task), tasks_(tasks) {
    mark("launch");
  }

  /// Records that `step` is done now.
  void mark(std::string_view step);
  /// What the launch cost this node, said after the steps.
  void set_costs(const LinkCosts& costs) { costs_ = costs; }
  bool enabled() const { return enabled_; }
  /// The line described above (without the "hyrun: " of the log).
  std::string line() const;
  /// The root's line over every node's costs (task -> costs, its own among them):
  ///   timings of 4 nodes (4 told the root): CPU ms hyrun max 52.1 (task 0), median 40.3; ...
  static std::string summary(const std::map<int, LinkCosts>& costs, int tasks);
  /// Prints line() as a job event (always shown), once, if enabled.
  void print();

 private:
  bool enabled_;
  std::string host_;
  int task_;
  int tasks_;
  static Clock::time_point& origin() {
    static Clock::time_point at = Clock::now();  // when not marked: the first use
    return at;
  }
  std::vector<std::pair<std::string, double>> steps_;
  std::optional<LinkCosts> costs_;
  bool printed_ = false;
};

}  // namespace hyrun
