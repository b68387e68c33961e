#pragma once
// SignalEvents moved to the process library (hyrun/process/signal_events.hpp). This name is
// kept only for worker/ep/elastic/staged_launch.hpp, which another change is rewriting;
// remove it once that file includes the new name.
#include "hyrun/process/signal_events.hpp"
