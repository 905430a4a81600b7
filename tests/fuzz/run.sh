#!/bin/sh
# One libFuzzer target of `make fuzz`:
#   run.sh BUILD NAME SECONDS DICT INPUT_DIR...
# SECONDS empty: every input once; else fuzz for that long, new inputs kept in
# BUILD/corpus/NAME.  DICT "-": none.  A crash, leak, timeout (10 s on one
# input) or out-of-memory (2 GiB) fails, its input in BUILD/crashes/.
set -u
build=$1 name=$2 seconds=$3 dict=$4
shift 4
mkdir -p "$build/corpus/$name" "$build/crashes"
for d in "$@"; do mkdir -p "$d" 2>/dev/null || true; done
if [ -n "$seconds" ]; then how="-max_total_time=$seconds"; else how="-runs=0"; fi
if [ "$dict" != - ]; then dict="-dict=$dict"; else dict=""; fi
log=$build/fuzz_$name.log
# shellcheck disable=SC2086 # $how and $dict are single words or none
if ! "$build/fuzz/fuzz_$name" $how $dict -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$build/crashes/$name-" "$build/corpus/$name" "$@" > "$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "fuzz_$name: FAILED (the whole log: $log; the input: $build/crashes/$name-*)" >&2
    exit 1
fi
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
corpus=$(ls "$build/corpus/$name" | wc -l)
echo "fuzz_$name: ${runs:-0} executions, no crash, leak or timeout ($corpus inputs in $build/corpus/$name)" >&2
