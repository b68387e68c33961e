# shellcheck shell=bash
# Sourced by bench/mpi.sh and bench/mpi-slurm.sh: one run of mpi-pingpong recorded, medians,
# ratios and the ping-pong table, the same for both.

# machine_cpu_ms: CPU time every process of this machine has used since boot, in ms (user,
# nice, system, irq and softirq of /proc/stat's first line).
machine_cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '/^cpu / { printf "%d\n", ($2 + $3 + $4 + $7 + $8) * 1000 / hz }' /proc/stat; }

# mpi_run FILE LOG COMMAND...: runs COMMAND (output to LOG; a failure ends the bench, showing
# it); appends "wall_ms init_max run_max cpu_ms" to FILE and the ping-pong lines to FILE.pp.
# cpu_ms is the whole machine's CPU time over the run: every rank, launcher and daemon, so
# that a cell whose CPU time is the cores times the wall time shows that the cores bound it.
# With EXPECT_RANKS set, fails unless that many ranks reported.
mpi_run() {
  local file=$1 log=$2 t0 t1 c0 c1; shift 2
  c0=$(machine_cpu_ms)
  t0=$(date +%s%N)
  "$@" >"$log" 2>&1 || { echo "failed: $*"; cat "$log"; exit 1; } >&2
  t1=$(date +%s%N)
  c1=$(machine_cpu_ms)
  if [ -n "${EXPECT_RANKS:-}" ] && [ "$(grep -c '^times rank' "$log")" != "$EXPECT_RANKS" ]; then
    { echo "not every rank of $EXPECT_RANKS reported: $*"; cat "$log"; exit 1; } >&2
  fi
  awk -v wall=$(( (t1 - t0) / 1000000 )) -v cpu=$((c1 - c0)) '/^times rank/ { if ($5 > i) i = $5; if ($7 > r) r = $7 }
    END { printf "%d %.1f %.1f %d\n", wall, i, r, cpu }' "$log" >>"$file"
  grep '^pingpong' "$log" >>"$file.pp" || true
}

# median_col FILE COLUMN
median_col() { awk -v c="$2" '{print $c}' "$1" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# ratio A B: A/B with two decimals, "-" when B is 0
ratio() { if [ "$(echo "$2 == 0" | bc)" = 1 ]; then echo "-"; else echo "$1 / $2" | bc -l | xargs printf '%.2f'; fi; }

# pingpong_table FILE_A FILE_B NAME_A NAME_B: latency and bandwidth per size, medians of the
# runs recorded in FILE_A.pp and FILE_B.pp, with the ratios A/B.
pingpong_table() {
  local a=$1.pp b=$2.pp bytes al bl ab bb
  printf '%9s | %14s | %15s | %5s | %14s | %15s | %5s\n' bytes "$3 lat us" "$4 lat us" ratio "$3 MB/s" "$4 MB/s" ratio
  printf -- '----------+----------------+-----------------+-------+----------------+-----------------+------\n'
  while read -r bytes; do
    al=$(pp_median "$a" "$bytes" 3); bl=$(pp_median "$b" "$bytes" 3)
    ab=$(pp_median "$a" "$bytes" 4); bb=$(pp_median "$b" "$bytes" 4)
    printf '%9s | %14s | %15s | %5s | %14s | %15s | %5s\n' "$bytes" "$al" "$bl" "$(ratio "$al" "$bl")" "$ab" "$bb" "$(ratio "$ab" "$bb")"
  done < <(awk '{print $2}' "$a" | sort -n -u)
}
pp_median() { awk -v b="$2" -v c="$3" '$2 == b {print $c}' "$1" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# launch_header CELL_NAME RATIO_NAME, then launch_rows CELL FILE_A FILE_B NAME_A NAME_B: the
# medians of MPI_Init, Init..Finalize, the wall time and the machine's CPU time of both
# launchers, with CPU / wall (this machine's cores in use, on average), the second row with
# the ratios A/B of the wall time and of MPI_Init. launch_footer explains the CPU columns.
launch_header() {
  printf '%5s | %-8s | %11s | %17s | %8s | %8s | %5s | %s\n' "$1" launcher "MPI_Init ms" "Init..Finalize ms" \
    "wall ms" "CPU ms" cores "$2: wall, MPI_Init"
  printf -- '------+----------+-------------+-------------------+----------+----------+-------+------------------\n'
}
launch_rows() {
  local a=$2 b=$3
  printf '%5s | %-8s | %11s | %17s | %8s | %8s | %5s |\n' "$1" "$4" "$(median_col "$a" 2)" "$(median_col "$a" 3)" \
    "$(median_col "$a" 1)" "$(median_col "$a" 4)" "$(ratio "$(median_col "$a" 4)" "$(median_col "$a" 1)")"
  printf '%5s | %-8s | %11s | %17s | %8s | %8s | %5s | %s\n' "$1" "$5" "$(median_col "$b" 2)" "$(median_col "$b" 3)" \
    "$(median_col "$b" 1)" "$(median_col "$b" 4)" "$(ratio "$(median_col "$b" 4)" "$(median_col "$b" 1)")" \
    "$(ratio "$(median_col "$a" 1)" "$(median_col "$b" 1)"), $(ratio "$(median_col "$a" 2)" "$(median_col "$b" 2)")"
}
launch_footer() {
  echo "CPU ms: the whole machine's CPU time over a run (every rank, launcher and daemon; /proc/stat, to"
  echo "the clock tick), median."
  echo "cores: CPU ms / wall ms. Near this machine's $(nproc) cores, the cores bound the run: every CPU ms a"
  echo "launcher adds is then wall time, which separate nodes, each with its own cores, would not pay."
}
