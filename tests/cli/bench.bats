#!/usr/bin/env bats
# The benches' shared rules (tests/bench/bench_common.sh and .py): the CPU
# that processes other than the bench's used while it ran is seen, reported
# and marks the result noisy; the load at start and at end is waited for and
# marks it noisy above 1.  Not the benches themselves (minutes each).  The
# load is read from a file of the test's own (HPS_BENCH_LOADAVG), which a
# test writes: the machine's moves with whatever else runs.

load helpers

setup() {
    export HPS_BENCH_LOCK=$BATS_TEST_TMPDIR/bench.lock TMPDIR=$BATS_TEST_TMPDIR/tmp
    mkdir "$TMPDIR"
    root=$BATS_TEST_DIRNAME/../..
    export HPS_BENCH_LOADAVG=$BATS_TEST_TMPDIR/loadavg BENCH_SETTLE_S=20
    load_is "0.10 0.20 0.30 1/80 123"
}

# the load file says $1, written whole (a reader never sees it half written)
load_is() {
    echo "$1" > "$HPS_BENCH_LOADAVG.new" && mv "$HPS_BENCH_LOADAVG.new" "$HPS_BENCH_LOADAVG"
}

# a bench of its name ($1) in shell (sh) or Python (py) that runs for $2 s
bench_of() {
    if [ "$1" = sh ]; then
        printf '. "%s/tests/bench/bench_common.sh"\nbench_begin sh\nsleep %s\nbench_end\n' "$root" "$2" > "$BATS_TEST_TMPDIR/b.sh"
        sh "$BATS_TEST_TMPDIR/b.sh"
    else
        python3 -c 'import sys, time; sys.path.insert(0, sys.argv[1]); import bench_common as b
b.begin("py"); time.sleep(float(sys.argv[2])); b.end("py")' "$root/tests/bench" "$2"
    fi
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

@test "bench: a load that stays above 1 at start and at end marks the result noisy, after the wait" {
    load_is "2.50 2.00 1.80 3/80 123"
    for side in sh py; do
        BENCH_SETTLE_S=1 run bench_of $side 0
        [ "$status" -eq 0 ]
        [[ "$output" == *"$side: cpu: "*"; load at start: 2.50 2.00 1.80 (after 1 s at rest)"* ]]
        [[ "$output" == *"; load right after the runs: 2.50, at end: 2.50 2.00 1.80 (after 1 s at rest);"* ]]
        [[ "$output" == *"$side: NOISY: load 2.5"*" at end > 1 after 1 s at rest; load 2.5"*" at start > 1 after 1 s at rest"* ||
           "$output" == *"$side: NOISY: load 2.5"*" at start > 1 after 1 s at rest; load 2.5"*" at end > 1 after 1 s at rest"* ]]
    done
}

@test "bench: a bench waits for the load to fall to 1 before it starts, and says how long" {
    for side in sh py; do
        load_is "1.90 1.50 1.20 2/80 123"
        (sleep 2; load_is "0.95 1.40 1.20 1/80 123") &
        run bench_of $side 0
        wait
        [ "$status" -eq 0 ]
        # the load it starts on is the one it waited for (a bench slower to
        # start than the 2 s reads it at once: no wait to say)
        [[ "$output" == *"; load at start: 0.95 1.40 1.20"* ]]
        waited=$(echo "$output" | sed -n 's/.*load at start: 0.95 1.40 1.20 (after \([0-9]*\) s at rest).*/\1/p')
        [ -z "$waited" ] || { [ "$waited" -ge 1 ] && [ "$waited" -lt 20 ]; }
        [[ "$output" == *"load right after the runs: 0.95, at end: 0.95 1.40 1.20;"* ]] # no wait at end
        [[ "$output" != *"NOISY: "*"load"* ]]
    done
}

@test "bench: an untimed bench does not wait for the load" {
    load_is "3.00 3.00 3.00 4/80 123"
    printf '. "%s/tests/bench/bench_common.sh"\nbench_begin u untimed\nrm -f "$BENCH_NOISY_FILE" "$BENCH_TIMES_FILE"\n' "$root" > "$BATS_TEST_TMPDIR/u.sh"
    run sh "$BATS_TEST_TMPDIR/u.sh"
    [ "$status" -eq 0 ]
    [ "$output" = "u: cpu: $(. "$root/tests/bench/bench_common.sh"; bench_cpu); load at start: 3.00 3.00 3.00" ]
}
