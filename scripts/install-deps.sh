#!/usr/bin/env bash
# Installs every Debian package hyrun needs to build, test and benchmark. Idempotent and
# quiet when everything is present; run as root (or with sudo available).
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libpmix-dev libucx-dev ucx-utils libhwloc-dev hwloc nettle-dev
  nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev libgtest-dev
  slurmctld slurmd slurm-client munge
  openmpi-bin libopenmpi-dev python3-mpi4py  # MPI programs under hyrun's PMIx server (tests, bench)
  mpich libmpich-dev  # MPICH programs under hyrun's PMI-1 server (tests, bench)
  libpmi2-0-dev  # Slurm's PMI-2 client library: a PMI-2 program under hyrun's PMI-2 server and native srun --mpi=pmi2 (tests)
  python3 iproute2 util-linux procps bc gnuplot-nox
  strace  # delays one system call of one hyrun, to hold a node back at a chosen step (tests)
  shellcheck clang-format  # the lint tests (scripts/shellcheck.sh, scripts/format.sh --check)
  # torch.distributed (gloo) tests and bench/torchrun.sh: 48 MB download, ~600 MiB installed
  # (171 packages without recommends), ~2.5 min on a busy 2-core machine.
  python3-torch
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: must run as root to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
