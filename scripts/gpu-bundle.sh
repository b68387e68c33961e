#!/usr/bin/env bash
# Packs hyrun and the EP programs, built with CUDA for sm_90, into one self-contained
# folder for GPU machines that have no package registry (only the NVIDIA driver):
#
#   scripts/gpu-bundle.sh DIR [--build-dir B] [--from-build B] [--allow-missing-cuda] [--jobs N]
#
# Default: configures B (build-bundle/) with /usr/local/cuda/bin/nvcc, sm_90, Release, and
# builds only the programs. --from-build B packs an existing build instead (CI does this
# with its own build). DIR gets:
#   bin/      hyrun ep-bench ep-elastic ep-check ep-bench-host ep-bench-gpu ep-cuda-selftest
#             cuda-device-report hello (stripped), elastic.py, and lstopo-no-graphics when
#             this machine has it
#   lib/      every shared library they load (ldd), except glibc (libc, libm, libdl,
#             libpthread, librt, ld-linux) and the CUDA driver (libcuda); libcudart comes along
#   lib/ucx/  UCX's transport modules (UCX_MODULE_DIR) and lib/ their libraries
#   lib/hwloc hwloc's PCI plugin (GPU discovery; HWLOC_PLUGINS_PATH)
#   lib/pmix  PMIx's MCA components (PMIX_MCA_mca_base_component_path)
#   plans/    examples/plans/*.json
#   run       wrapper: DIR/run PROGRAM ARGS... with LD_LIBRARY_PATH and the plugin paths
#             set to the bundle only (hyrun passes them on to its ranks);
#             eval "$(DIR/run --print-env)" sets them in a script
#   MANIFEST  what was packed, from which commit, with which nvcc
# The folder must stay under 64 MiB (checked). The CUDA runtime packed is CUDA 13's, which
# needs an NVIDIA driver >= 580 on the GPU machine.
# Exit codes: 0 packed, 1 a failure (named), 2 usage.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=""; build=$root/build-bundle; from_build=""; allow_missing_cuda=0; jobs=$(nproc)
limit_mib=64
programs_cpu=(launcher/hyrun worker/ep/programs/ep-bench worker/ep/programs/ep-elastic worker/ep/programs/ep-check worker/ep/programs/ep-bench-host examples/hello)
programs_cuda=(worker/ep/programs/ep-bench-gpu worker/ep/programs/ep-cuda-selftest worker/ep/programs/cuda-device-report)
targets=(hyrun ep-bench ep-elastic ep-check ep-bench-host hello ep-bench-gpu ep-cuda-selftest cuda-device-report)

die() { echo "gpu-bundle.sh: $*" >&2; exit 1; }
usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case $1 in
  --build-dir) build=$2; shift 2 ;;
  --from-build) from_build=$2; shift 2 ;;
  --allow-missing-cuda) allow_missing_cuda=1; shift ;;
  --jobs) jobs=$2; shift 2 ;;
  -h|--help) usage; exit 0 ;;
  -*) echo "gpu-bundle.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  *) [ -z "$dir" ] || { echo "gpu-bundle.sh: one DIR only ('$dir', then '$1')" >&2; exit 2; }; dir=$1; shift ;;
  esac
done
[ -n "$dir" ] || { echo "gpu-bundle.sh: which folder? usage: gpu-bundle.sh DIR [options] (see --help)" >&2; exit 2; }
if [ -e "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ] && [ ! -f "$dir/MANIFEST" ]; then
  die "$dir exists, is not empty and is not a bundle; give a new or empty folder"
fi

# 1. the programs
if [ -n "$from_build" ]; then
  build=$(cd "$from_build" && pwd) || die "--from-build $from_build: no such folder"
else
  nvcc=/usr/local/cuda/bin/nvcc
  [ -x "$nvcc" ] || die "$nvcc is missing: the bundle is built with CUDA (or use --from-build)"
  mkdir -p "$build"
  echo "== configure $build (CUDA sm_90, Release)"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DHYRUN_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" \
    -DCMAKE_CUDA_ARCHITECTURES=90 >"$build/bundle-configure.log" 2>&1 ||
    { tail -30 "$build/bundle-configure.log" >&2; die "configure failed (log: $build/bundle-configure.log)"; }
  echo "== build ${targets[*]}"
  cmake --build "$build" -j "$jobs" --target "${targets[@]}" >"$build/bundle-build.log" 2>&1 ||
    { tail -40 "$build/bundle-build.log" >&2; die "build failed (log: $build/bundle-build.log)"; }
fi
programs=()
for p in "${programs_cpu[@]}"; do
  [ -x "$build/$p" ] || die "$build/$p is missing (build the project first)"
  programs+=("$build/$p")
done
missing_cuda=()
for p in "${programs_cuda[@]}"; do
  if [ -x "$build/$p" ]; then programs+=("$build/$p"); else missing_cuda+=("$p"); fi
done
if [ ${#missing_cuda[@]} -gt 0 ] && [ "$allow_missing_cuda" -eq 0 ]; then
  die "$build has no CUDA programs (${missing_cuda[*]}): it was built without nvcc"
fi

# The kernels must be built for the H100 (sm_90).
cuda_arch=""
if [ ${#missing_cuda[@]} -eq 0 ]; then
  cuda_arch=$(grep -o 'arch=compute_[0-9]*,code=[^ ]*' "$build/worker/ep/cuda/CMakeFiles/hyrun_ep_cuda.dir/flags.make" 2>/dev/null | head -1)
  [[ $cuda_arch == *sm_90* ]] || die "the CUDA kernels in $build are not built for sm_90 ('${cuda_arch:-unknown}'); configure with -DCMAKE_CUDA_ARCHITECTURES=90"
fi

# 2. the folder (written next to DIR, moved into place at the end: never half-written)
parent=$(dirname "$dir")
mkdir -p "$parent"
stage=$(mktemp -d "$parent/.gpu-bundle.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib/ucx" "$stage/lib/hwloc" "$stage/lib/pmix" "$stage/plans"

# Libraries the GPU machine has itself: glibc (ABI-compatible from older to newer) and the
# CUDA driver (must match the kernel module).
excluded() {
  case $(basename "$1") in
  libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libresolv.so.*|ld-linux*.so.*|libcuda.so*|libnvidia-*) return 0 ;;
  *) return 1 ;;
  esac
}
# copy_deps FILE: every library FILE loads (ldd resolves them transitively) into lib/.
copy_deps() {
  local out
  out=$(ldd "$1" 2>&1) || die "ldd $1: $out"
  if grep -q "not found" <<<"$out"; then die "$1 needs a library this machine lacks: $(grep 'not found' <<<"$out" | head -3)"; fi
  awk '$2 == "=>" && $3 ~ /^\// { print $3 }' <<<"$out" | while read -r lib; do
    excluded "$lib" && continue
    [ -e "$stage/lib/$(basename "$lib")" ] || cp -L "$lib" "$stage/lib/$(basename "$lib")"
  done
}

for p in "${programs[@]}"; do
  cp "$p" "$stage/bin/"
  strip --strip-unneeded "$stage/bin/$(basename "$p")"
  copy_deps "$p"
done
# elastic.py, what CloudAI runs: it finds ep-elastic beside itself.
cp "$root/worker/ep/programs/elastic.py" "$stage/bin/elastic.py"
# hwloc's lstopo, to save a GPU machine's topology as XML (a binding test fixture).
if lstopo=$(command -v lstopo-no-graphics); then
  cp "$lstopo" "$stage/bin/"
  copy_deps "$lstopo"
fi
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
ucx_dir=/usr/lib/$multiarch/ucx
[ -d "$ucx_dir" ] || die "UCX's module folder $ucx_dir is missing (install libucx0)"
for m in "$ucx_dir"/libuct_*.so; do
  cp -L "$m" "$stage/lib/ucx/"
  copy_deps "$m"
done
hwloc_pci=/usr/lib/$multiarch/hwloc/hwloc_pci.so
[ -f "$hwloc_pci" ] || die "hwloc's PCI plugin $hwloc_pci is missing (GPU discovery needs it)"
cp -L "$hwloc_pci" "$stage/lib/hwloc/"
copy_deps "$hwloc_pci"
pmix_dir=$(dirname "$(ldd "$build/launcher/hyrun" | awk '$1 ~ /^libpmix/ { print $3 }')")/pmix
if [ -d "$pmix_dir" ]; then
  for m in "$pmix_dir"/*.so; do
    cp -L "$m" "$stage/lib/pmix/"
    copy_deps "$m"
  done
fi
cp "$root"/examples/plans/*.json "$stage/plans/"
# Libraries are data here: strip their debug sections too.
find "$stage/lib" -name '*.so*' -type f -exec strip --strip-unneeded {} + 2>/dev/null || true

cat >"$stage/run" <<'EOF'
#!/bin/sh
# DIR/run PROGRAM [ARGS...]: runs bin/PROGRAM (or any program) with the bundle's libraries
# and plugins only. hyrun passes the environment on to its ranks.
here=$(cd "${0%/*}" && pwd)
[ $# -ge 1 ] || { echo "usage: $0 PROGRAM [ARGS...] (PROGRAM: $(ls "$here/bin" | tr '\n' ' '))" >&2; exit 2; }
if [ "$1" = --print-env ]; then  # for scripts: eval "$(DIR/run --print-env)"
  echo "export LD_LIBRARY_PATH='$here/lib'\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
  echo "export UCX_MODULE_DIR='$here/lib/ucx' HWLOC_PLUGINS_PATH='$here/lib/hwloc' PMIX_MCA_mca_base_component_path='$here/lib/pmix'"
  exit 0
fi
prog=$1; shift
case $prog in */*) ;; *) prog=$here/bin/$prog ;; esac
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export UCX_MODULE_DIR="$here/lib/ucx"
export HWLOC_PLUGINS_PATH="$here/lib/hwloc"
export PMIX_MCA_mca_base_component_path="$here/lib/pmix"
exec "$prog" "$@"
EOF
chmod +x "$stage/run"

{
  echo "hyrun GPU bundle"
  echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (modified)')"
  echo "built: $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -m), from $build"
  echo "nvcc: $(/usr/local/cuda/bin/nvcc --version 2>/dev/null | tail -1 || echo none); kernels: ${cuda_arch:-none}"
  [ ${#missing_cuda[@]} -eq 0 ] || echo "MISSING (built without CUDA): ${missing_cuda[*]}"
  echo "needs on the target: glibc >= this machine's ($(ldd --version | head -1 | awk '{print $NF}')), an NVIDIA driver >= 580 (CUDA 13)"
  echo "files:"
  (cd "$stage" && find . -type f ! -name MANIFEST | sort | xargs du -k | awk '{ printf "  %6d KiB %s\n", $1, $2 }')
} >"$stage/MANIFEST"

size_kib=$(du -sk "$stage" | cut -f1)
[ "$size_kib" -le $((limit_mib * 1024)) ] ||
  die "the bundle has $((size_kib / 1024)) MiB, above the limit of $limit_mib MiB (see $stage/MANIFEST)"
rm -rf "$dir"
mv "$stage" "$dir"
trap - EXIT
echo "gpu-bundle.sh: $dir: ${#programs[@]} programs, $(find "$dir/lib" -mindepth 1 -maxdepth 1 -name '*.so*' | wc -l) libraries, $(find "$dir/lib/ucx" -mindepth 1 -maxdepth 1 | wc -l) UCX modules, $((size_kib / 1024)) MiB (limit $limit_mib MiB)"
