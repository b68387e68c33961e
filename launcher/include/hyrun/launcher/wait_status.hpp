#pragma once
// ProcessEnd and signal_name moved to the process library (hyrun/process/wait_status.hpp).
// This name is kept only for worker/ep/elastic/staged_launch.cpp, which another change is
// rewriting; remove it once that file includes the new name.
#include "hyrun/process/wait_status.hpp"
