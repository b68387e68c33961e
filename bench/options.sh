# shellcheck shell=bash
# Sourced by the benches whose options all take a value: bench_options SPEC ARGS... sets,
# for each "--name VALUE" in ARGS, the variable that SPEC pairs with --name ("--nodes:nodes
# --reps:reps"); an option not in SPEC, or one without its value, calls the bench's usage.
bench_options() {
  local spec=$1 pair var
  shift
  while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || usage
    var=""
    for pair in $spec; do [ "${pair%%:*}" = "$1" ] && var=${pair#*:}; done
    [ -n "$var" ] || usage
    printf -v "$var" '%s' "$2"
    shift 2
  done
}
