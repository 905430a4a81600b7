#!/bin/sh
# make bench-fidelity: does a plan predict its run on this machine?  See
# tests/bench/bench_fidelity.py (it takes the bench lock and names the CPU and
# the load).  MODELS, BENCH_MIN_S, RUNS, ROWS, NIC_GBPS, REPS, PROFILE_S and
# PACE_S (the pace reference's seconds; 0: none) can be set.
set -eu
bin=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
command -v mpirun >/dev/null || { echo "bench-fidelity: mpirun is not installed (make deps)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$root/tests/bench/bench_fidelity.py" "$bin" "$work"
