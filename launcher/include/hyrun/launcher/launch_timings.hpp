#pragma once
// `--timings`: when each step of a node's launch was done, in milliseconds from hyrun's
// main (mark_process_start), for finding where a launch's time goes (docs/performance.md).
// Each hyrun prints its own line when its job ends, on stderr:
//   hyrun: timings on HOST (task T of N), ms: launch 8.0, plan 30.1, rank 0 started 36.0, ...
// "launch" is when the launch sequence began: the command line is parsed and, under srun
// or mpirun, PMIx is initialised.
// Steps are said in the order they were done; a step not reached is not in the line.
#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hyrun {

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
  /// The line described above (without the "hyrun: " of the log).
  std::string line() const;
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
  bool printed_ = false;
};

}  // namespace hyrun
