#!/bin/sh
# make bench-plan: builds tests/bench/bench_plan.c against the last build's libhps.a and
# runs the scheduler benchmark (not part of make check).  $1: the bin dir (unused:
# the benchmark calls the library directly, so the times are planning times).
# Options after the bin dir go to the benchmark (--quick, --small, --evals N).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
# the library of the last build: build/ (CUDA) or build-nocuda/ (CUDA=0)
lib="$root/build/libhps.a"
if [ ! -f "$lib" ] || { [ -f "$root/build-nocuda/libhps.a" ] && [ "$root/build-nocuda/libhps.a" -nt "$lib" ]; }; then
  lib="$root/build-nocuda/libhps.a"
fi
out="$(dirname "$lib")/tests/bench_plan"
mkdir -p "$(dirname "$out")"
cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -fopenmp -I"$root/lib" \
   "$root/tests/bench/bench_plan.c" "$lib" -o "$out" \
   -ljansson -lzstd -lopenblas -lm
shift
exec "$out" "$@"
