#!/bin/sh
# make bench-plan: builds tests/bench/bench_plan.c against build/libhps.a and
# runs the scheduler benchmark (not part of make check).  $1: the bin dir (unused:
# the benchmark calls the library directly, so the times are planning times).
# Pass --quick as $2 for one seed per cell instead of two.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/build/tests/bench_plan"
mkdir -p "$root/build/tests"
cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -fopenmp -I"$root/lib" \
   "$root/tests/bench/bench_plan.c" "$root/build/libhps.a" -o "$out" \
   -ljansson -lzstd -lopenblas -lm
exec "$out" ${2:-}
