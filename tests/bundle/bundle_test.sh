#!/usr/bin/env bash
# The GPU bundle (scripts/gpu-bundle.sh) packed from this build: under 64 MiB, every
# library its programs and UCX modules load resolves inside it (or is glibc), and the
# programs run from it with only glibc left on the machine: inside a private mount
# namespace, /usr/lib/<multiarch> is replaced by a folder holding glibc alone and CUDA's
# folder is hidden; then hyrun + hello, ep-check (host) and an elastic plan with a kill
# run from the bundle, ep-cuda-selftest loads the bundled CUDA runtime and skips (no GPU
# here), and ep-bench --backend cuda fails at once naming why.
#   bundle_test.sh   (BUILD_DIR: the build to pack; SOURCE_DIR: the repository)
source "$(dirname "$0")/../integration/lib.sh"
bundle=$WORK/bundle
run_job 300 "$SOURCE_DIR/scripts/gpu-bundle.sh" "$bundle" --from-build "$BUILD_DIR" --allow-missing-cuda
expect_rc 0
[ -x "$bundle/run" ] || { fail "no bundle"; show_output; finish; }
kib=$(du -sk "$bundle" | cut -f1)
[ "$kib" -lt $((64 * 1024)) ] && pass "bundle is $((kib / 1024)) MiB (< 64 MiB)" || fail "bundle is $((kib / 1024)) MiB"
for p in hyrun ep-bench ep-check ep-bench-host hello; do
  [ -x "$bundle/bin/$p" ] && pass "bin/$p" || fail "bin/$p missing"
done

# Every dependency of every packed file resolves to the bundle or to glibc.
glibc='^(libc|libm|libdl|libpthread|librt|libresolv)\.so|^ld-linux|^linux-vdso'
bad=0
for f in "$bundle"/bin/* "$bundle"/lib/ucx/*.so "$bundle"/lib/hwloc/*.so "$bundle"/lib/pmix/*.so; do
  [ -e "$f" ] || continue
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    [[ $name =~ $glibc ]] && continue
    case $path in "$bundle"/lib/*) ;; *) fail "$(basename "$f"): $name resolves to '$path', not the bundle"; bad=1 ;; esac
  done < <(LD_LIBRARY_PATH=$bundle/lib ldd "$f")
done
[ "$bad" -eq 0 ] && pass "every library resolves inside the bundle (or is glibc)"

# A machine with glibc and nothing else: a mount namespace (needs root; skipped without it).
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
libdir=/usr/lib/$multiarch
mkdir -p "$WORK/glibc"
for lib in libc.so.6 libm.so.6 ld-linux-x86-64.so.2 libdl.so.2 libpthread.so.0 librt.so.1 libresolv.so.2; do
  [ -e "$libdir/$lib" ] && cp -L "$libdir/$lib" "$WORK/glibc/"
done
# "${bare[@]}" CMD...: runs CMD with only glibc in $libdir and no CUDA folder. Only the
# bundle's programs and dash (glibc alone) run inside; the mounts come first, while mount
# still finds its libraries.
hide_cuda=""
[ -d /usr/local/cuda ] && hide_cuda="mount -t tmpfs none $(readlink -f /usr/local/cuda) &&"
bare=(unshare -m --propagation private sh -c "$hide_cuda mount --bind '$WORK/glibc' '$libdir' && exec env -u LD_LIBRARY_PATH \"\$@\"" bare)
if ! unshare -m --propagation private true 2>/dev/null; then
  echo "SKIPPED (part): unshare -m needs root; the run from a bare machine was not tried"
  finish
fi
# The namespace really hides the libraries: the build's own hyrun cannot start there.
run_job 30 "${bare[@]}" "$BUILD_DIR/launcher/hyrun" --version
[ "$RC" -ne 0 ] && grep -q "error while loading shared libraries" "$ERR" &&
  pass "outside the bundle nothing loads ($(grep -m1 -o 'lib[^:]*: cannot open' "$ERR"))" || { fail "the bare machine still has the libraries"; show_output; }
run_job 60 "${bare[@]}" "$bundle/run" hyrun -n 2 -- "$bundle/bin/hello"
expect_rc 0
expect_stdout "^rank 0: ring of 2 ranks ok"
run_job 120 "${bare[@]}" "$bundle/run" hyrun -n 2 -- "$bundle/bin/ep-check" --shapes 16:2048:4 --no-fault-rounds
expect_rc 0
expect_stdout "^ep-check: SUMMARY 2 ranks, .* ALL PASSED$"
run_job 120 "${bare[@]}" "$bundle/run" hyrun -n 4 -- "$bundle/bin/ep-bench" --plan "$bundle/plans/expansion_fault_contraction.json" \
  --backend host --validate --validate-phase-failures \
  --num-tokens 16 --hidden-dim 512 --num-topk 4 --warmup 2 --iters 6 --timeout-ms 20000
expect_rc 0
expect_stdout "validation passed"
expect_stdout "global_rank=0, local_rank=0 -> end phase 3"
# ep-elastic (elastic.py's command line) from the bundle: it finds ep-bench beside itself,
# and starts ranks 4-7 when phase 1 begins.
reserve_port || exit 1
cp "$bundle/plans/single_expansion.json" "$WORK/plan.json"
run_job 120 "${bare[@]}" "$bundle/run" ep-elastic --plan "$WORK/plan.json" --num-processes 8 --backend host \
  --num-tokens 16 --hidden-dim 512 --num-topk 4 --warmup 2 --iters 6 --port "$PORT"
expect_rc 0
expect_stdout "global_rank=7, local_rank=7 -> end phase 1"
[ -f "$bundle/bin/elastic.py" ] && pass "elastic.py is in the bundle" || fail "elastic.py is not in the bundle"
if [ -x "$bundle/bin/ep-cuda-selftest" ]; then
  run_job 60 "${bare[@]}" "$bundle/run" ep-cuda-selftest
  [ "$RC" -eq 77 ] && pass "ep-cuda-selftest loads the bundled CUDA runtime and skips without a GPU" ||
    { fail "ep-cuda-selftest: exit $RC (expected 77 without a GPU)"; show_output; }
  run_job 60 "${bare[@]}" "$bundle/run" hyrun -n 2 -- "$bundle/bin/ep-bench" --plan '[[0,1]]' --backend cuda
  [ "$RC" -eq 2 ] && grep -q -- "--backend cuda: no CUDA device" "$ERR" && pass "ep-bench --backend cuda fails at once: $(grep -m1 -- '--backend cuda' "$ERR")" ||
    { fail "ep-bench --backend cuda: exit $RC"; show_output; }
fi
finish
