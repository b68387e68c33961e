// hyrun: start the ranks of a job, locally or as one PMIx process per node.
#include "hyrun/common/error.hpp"
#include "hyrun/common/logging.hpp"
#include "hyrun/launcher/cli_options.hpp"
#include "hyrun/launcher/hybrid_mode.hpp"
#include "hyrun/launcher/launch_timings.hpp"
#include "hyrun/launcher/local_mode.hpp"
#include "hyrun/process/job_events.hpp"
#include "hyrun/process/launcher_process.hpp"
#include "hyrun/process/own_stderr.hpp"

int main(int argc, char** argv) {
  hyrun::LaunchTimings::mark_process_start();
  hyrun::hold_standard_fds();  // before the command line's own output, too
  hyrun::CommandLine command_line;
  if (const auto code = command_line.parse(argc, argv)) return *code;
  const auto& options = command_line.options();
  try {
    // Never blocking on a stalled reader of stderr (OwnStderr).
    hyrun::init_logging("hyrun", options.log_level, hyrun::own_stderr_log_sink());
    auto signals = hyrun::prepare_launcher_process();
    if (auto pmix = hyrun::connect_pmix_for(options, signals)) return hyrun::run_hybrid(options, signals, *pmix);
    return hyrun::run_local(options, signals);
  } catch (const hyrun::Error& e) {
    hyrun::job_event_line(e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    hyrun::job_event("internal error: {}", e.what());
    return hyrun::exit_code::kLauncherError;
  }
}
