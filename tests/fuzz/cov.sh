#!/bin/sh
# Each fuzz target's coverage of lib/ over its inputs (seeds, regressions)
# and its corpus, from the replays `make fuzz-cov` builds with clang's
# source-based coverage:   tests/fuzz/cov.sh BUILD CORPUS_DIR NAME...
# One line a target: the inputs replayed; the lines, functions and branches
# of lib/ they ran (of those linked into the target); and which of the loaders
# behind the checksums ran, and how often (issue 26: "the fuzzers stop at
# the door").  The profiles stay in BUILD/cov/ for llvm-cov show.
set -eu
build=$1 corpus=$2
shift 2
cov=$build/cov
mkdir -p "$cov"
deep="hps_table_load hps_trainer_step hps_shard_read hps_rows_decode_batched hps_rows_dense_rows dist_read_roles"
printf '%-12s %7s %17s %15s %17s  %s\n' target inputs "lib lines" "lib functions" "lib branches" "deep functions run (times)"
for name; do
    bin=$build/tests/replay_$name
    rm -f "$cov/$name.profraw"
    out=$(LLVM_PROFILE_FILE=$cov/$name.profraw "$bin" "$corpus/$name" 2>/dev/null) ||
        echo "replay_$name failed: run it for the message" >&2
    inputs=$(echo "$out" | sed -n 's/.*: \([0-9]*\) inputs replayed/\1/p')
    llvm-profdata merge -sparse "$cov/$name.profraw" -o "$cov/$name.profdata"
    # TOTAL: regions missed cover functions missed cover lines missed cover branches missed cover
    total=$(llvm-cov report "$bin" -instr-profile="$cov/$name.profdata" lib | awk '$1 == "TOTAL"')
    ran=$(llvm-profdata show -all-functions "$cov/$name.profdata" | awk -v deep="$deep" '
        BEGIN { n = split(deep, d, " "); for (i = 1; i <= n; i++) want[d[i]] = 1 }
        /^  [^ ].*:$/ { f = substr($1, 1, length($1) - 1) }
        /Function count:/ && (f in want) && $3 > 0 { printf "%s%s(%s)", sep, f, $3; sep = " " }')
    echo "$total" | awk -v n="$name" -v i="${inputs:-0}" -v ran="${ran:--}" '{
        printf "%-12s %7s %7d/%-6d %3.0f%% %5d/%-5d %3.0f%% %7d/%-6d %3.0f%%  %s\n", n, i,
               $8 - $9, $8, $10, $5 - $6, $5, $7, $11 - $12, $11, $13, ran }'
done
