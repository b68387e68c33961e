#include "hyrun/launcher/launch_options.hpp"

namespace hyrun {

SupervisorOptions supervisor_options(const LaunchOptions& options) {
  SupervisorOptions narrow;
  narrow.command = options.command;
  narrow.bootstrap_timeout = options.bootstrap_timeout;
  narrow.grace_period = options.grace_period;
  narrow.max_restarts = options.max_restarts;
  narrow.label = options.label;
  narrow.timestamp_output = options.timestamp_output;
  narrow.output_filename = options.output_filename;
  return narrow;
}

}  // namespace hyrun
