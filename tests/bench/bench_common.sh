# Sourced by the bench scripts (tests/bench/README.md, "Honest figures"): one
# bench at a time on the machine (a lock), the CPU and the load named at
# start and end, and the rule that marks a result noisy.  bench_common.py is
# the same for the Python benches; keep the two rules alike.
BENCH_LOCK=${HPS_BENCH_LOCK:-/tmp/hps-bench.lock}
BENCH_LOAD_MAX=1.5                    # 1-minute load average above it: noisy
BENCH_SPREAD_MAX=${BENCH_SPREAD_MAX:-0.05} # coefficient of variation of one configuration's runs
BENCH_MIN_S=${BENCH_MIN_S:-5}         # seconds each run lasts at least

bench_cpu() {
    m=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
    echo "${m:-$(uname -m)}, $(nproc) cores"
}

bench_load() { cut -d' ' -f1 /proc/loadavg; }

# bench_noisy REASON: the result is marked noisy, for REASON
bench_noisy() { echo "$1" >> "$BENCH_NOISY_FILE"; }

# bench_note_load: the load now counts toward the verdict (between runs)
bench_note_load() {
    l=$(bench_load)
    if awk -v l="$l" -v m="$BENCH_LOAD_MAX" 'BEGIN { exit !(l > m) }'; then
        bench_noisy "load $l > $BENCH_LOAD_MAX"
    fi
}

# bench_begin NAME: waits for any other bench, then names the CPU and the load
bench_begin() {
    BENCH_NAME=$1
    exec 9>> "$BENCH_LOCK"
    if ! flock -n 9; then
        echo "$BENCH_NAME: waiting for $BENCH_LOCK (another bench is running)" >&2
        flock 9
    fi
    export HPS_BENCH_LOCKED=1 # the Python side of this bench holds it through us
    BENCH_NOISY_FILE=$(mktemp "${TMPDIR:-/tmp}/hps-bench-noisy.XXXXXX")
    export BENCH_NOISY_FILE
    echo "$BENCH_NAME: cpu: $(bench_cpu); load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    bench_note_load
}

# bench_stats FILE: "mean sd cv" of the numbers of FILE's first column
bench_stats() {
    awk '{ x[NR] = $1; s += $1 } END {
        m = s / NR; for (i = 1; i <= NR; i++) v += (x[i] - m) ^ 2
        sd = NR > 1 ? sqrt(v / (NR - 1)) : 0
        printf "%g %g %g\n", m, sd, (m > 0 ? sd / m : 0) }' "$1"
}

# bench_spread WHAT CV: marks the result noisy when CV passes the bound
bench_spread() {
    if awk -v c="$2" -v m="$BENCH_SPREAD_MAX" 'BEGIN { exit !(c > m) }'; then
        bench_noisy "$1: runs spread $(awk -v c="$2" 'BEGIN { printf "%.1f", 100 * c }')% (sd/mean) > $(awk -v m="$BENCH_SPREAD_MAX" 'BEGIN { printf "%.0f", 100 * m }')%"
    fi
}

# bench_end: the load at end and the verdict, "quiet" or "NOISY: why"
bench_end() {
    bench_note_load
    echo "$BENCH_NAME: cpu: $(bench_cpu); load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
    if [ -s "$BENCH_NOISY_FILE" ]; then
        echo "$BENCH_NAME: NOISY: $(sort -u "$BENCH_NOISY_FILE" | paste -sd ';' - | sed 's/;/; /g')"
    else
        echo "$BENCH_NAME: quiet: load <= $BENCH_LOAD_MAX at start, between runs and at end; every configuration's runs within $(awk -v m="$BENCH_SPREAD_MAX" 'BEGIN { printf "%.0f", 100 * m }')% (sd/mean)"
    fi
    rm -f "$BENCH_NOISY_FILE"
}
