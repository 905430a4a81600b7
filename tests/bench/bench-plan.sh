#!/bin/sh
# make bench-plan: runs the scheduler benchmark, tests/bench/bench_plan.c as make
# built it (HPS_BENCH_PLAN; not part of make check).  $1: the bin dir (unused:
# the benchmark calls the library directly, so the times are planning times).
# Options after the bin dir go to the benchmark (--quick, --small, --evals N,
# --verbose, --only ROWS,SUITES, --match NAME, --validation, --seeds N, --help;
# see bench_plan.c).
set -eu
# the benchmark binary is built by make: run it as `make bench-plan`
[ -n "${HPS_BENCH_PLAN:-}" ] || { echo "bench-plan.sh: run it as: make bench-plan" >&2; exit 2; }
shift
. "$(dirname "$0")/bench_common.sh"
bench_begin bench-plan
"$HPS_BENCH_PLAN" "$@"
bench_end
