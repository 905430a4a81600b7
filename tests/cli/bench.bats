#!/usr/bin/env bats
# The benches' shared rules (tests/bench/bench_common.sh and .py): the CPU
# that processes other than the bench's used while it ran is seen, reported
# and marks the result noisy.  Not the benches themselves (minutes each).

load helpers

setup() {
    export HPS_BENCH_LOCK=$BATS_TEST_TMPDIR/bench.lock TMPDIR=$BATS_TEST_TMPDIR/tmp
    mkdir "$TMPDIR"
    root=$BATS_TEST_DIRNAME/../..
}

# every core busy for 1.5 s in processes the bench did not start
burn_beside() {
    for _ in $(seq "$(nproc)"); do
        setsid timeout 1.5 sh -c 'while :; do :; done' >/dev/null 2>&1 &
    done
}

@test "bench: a shell bench reports the CPU other processes used while it ran, and is noisy for it" {
    cat > "$BATS_TEST_TMPDIR/b.sh" <<SH
set -eu
. "$root/tests/bench/bench_common.sh"
bench_begin b
trap 'rm -f "\$BENCH_NOISY_FILE" "\$BENCH_TIMES_FILE"' EXIT
sleep 1.5
bench_end
SH
    burn_beside
    run sh "$BATS_TEST_TMPDIR/b.sh"
    wait
    [ "$status" -eq 0 ]
    share=$(echo "$output" | sed -n 's/.*other processes: \([0-9.]*\)% of the CPU.*/\1/p')
    awk -v s="$share" 'BEGIN { exit !(s > 5) }'
    [[ "$output" == *"b: NOISY: "*"other processes used $share% of the CPU > 5%"* ]] # beside any other reason (the load)
    [ -z "$(ls "$TMPDIR")" ] # its files removed
}

@test "bench: a Python bench reports the CPU other processes used while it ran, and is noisy for it" {
    burn_beside
    run python3 -c 'import sys, time; sys.path.insert(0, sys.argv[1]); import bench_common as b
b.begin("p"); time.sleep(1.5); b.end("p")' "$root/tests/bench"
    wait
    [ "$status" -eq 0 ]
    share=$(echo "$output" | sed -n 's/.*other processes: \([0-9.]*\)% of the CPU.*/\1/p')
    awk -v s="$share" 'BEGIN { exit !(s > 5) }'
    [[ "$output" == *"p: NOISY: "*"other processes used $share% of the CPU > 5%"* ]]
}
