#!/usr/bin/env bash
# Installs this build into a private prefix, builds tests/outoftree against it with
# find_package(hyrun), and runs the result under the installed hyrun.
source "$(dirname "$0")/../integration/lib.sh"
src=$(cd "$(dirname "$0")" && pwd)
prefix=$WORK/prefix
run_job 300 cmake --install "$BUILD_DIR" --prefix "$prefix"
expect_rc 0
[ -x "$prefix/bin/hyrun" ] && pass "hyrun installed" || fail "no $prefix/bin/hyrun"
[ -f "$prefix/include/hyrun/worker.hpp" ] && pass "worker header installed" || fail "worker header missing"
# The elastic plan model is ep-bench's, not the SDK's (nor is nlohmann-json an SDK dependency).
[ ! -e "$prefix/include/hyrun/common/elastic_plan.hpp" ] && [ ! -e "$prefix/include/hyrun/ep/plan/elastic_plan.hpp" ] && pass "no plan model in the SDK" || fail "elastic_plan.hpp installed"
run_job 300 cmake -S "$src" -B "$WORK/build" -DCMAKE_PREFIX_PATH="$prefix"
expect_rc 0
run_job 300 cmake --build "$WORK/build"
expect_rc 0
run_job 60 "$prefix/bin/hyrun" -n 3 -- "$WORK/build/user-program"
expect_rc 0
for r in 0 1 2; do expect_stdout "^user program rank $r of 3: allgather ok$"; done
finish
