#!/bin/sh
# make bench-jobs: runs the joint planner's benchmark, tests/bench/bench_jobs.c
# as make built it (HPS_BENCH_JOBS; not part of make check).  $1: the bin dir
# (unused: the benchmark calls the library directly).  Options after it go to
# the benchmark (--quick, --bound S, --help; see bench_jobs.c).
set -eu
[ -n "${HPS_BENCH_JOBS:-}" ] || { echo "bench-jobs.sh: run it as: make bench-jobs" >&2; exit 2; }
shift
. "$(dirname "$0")/bench_common.sh"
bench_begin bench-jobs
"$HPS_BENCH_JOBS" "$@"
bench_end
