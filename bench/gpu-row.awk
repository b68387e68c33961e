# One ep-bench-gpu launch's output (every rank's lines, rank 0's baselines) as one row of
# space-separated fields, for bench/gpu.sh and bench/gpu-compare.sh:
#   n mode per_rank_gbps summed_gbps dispatch_us combine_us median_us min_us max_us copy_gbps summed_over_copy
# averaged over the ranks (medians), the smallest min and the largest max; then, when rank 0
# timed the FP8 cast alone, a line "CAST n mode <its fp8-cast line>".
#   awk -v n=8 -v mode=ipc -f bench/gpu-row.awk LOG
/gpu-bench: mode=/ {
  for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
  g += v["ep_gbps_median"]; med += v["median_us"]; if (v["max_us"] > mx) mx = v["max_us"]
  dm += v["dispatch_median_us"]; cm += v["combine_median_us"]
  if (mn == "" || v["min_us"] < mn) mn = v["min_us"]
  r++
}
/^d2d-copy:/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "gbps_median") copy = kv[2] } }
/^fp8-cast:/ { cast = $0 }
END {
  if (r == 0 || copy == "") exit 1
  printf "%d %s %.2f %.1f %.1f %.1f %.1f %.1f %.1f %.2f %.3f\n", n, mode, g / r, g, dm / r, cm / r, med / r, mn, mx, copy, g / copy
  if (cast != "") print "CAST " n " " mode " " cast
}
