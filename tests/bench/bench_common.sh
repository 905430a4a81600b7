# Sourced by the bench scripts (tests/bench/README.md, "Honest figures"): one
# bench at a time on the machine (a lock), the CPU and the load named at
# start and end, and the rule that marks a result noisy.  bench_common.py is
# the same for the Python benches; keep the two rules alike.
BENCH_LOCK=${HPS_BENCH_LOCK:-/tmp/hps-bench.lock}
BENCH_QUIET_LOAD=1                    # 1-minute load at start and at end above it: noisy
# whole seconds to wait, at most, for the load to fall to it: 60 ln(cores) + 60
# (a bench on every core leaves the load near their count, which decays to 1
# in 60 ln(cores) s), 120 at least
BENCH_SETTLE_S=${BENCH_SETTLE_S:-$(awk -v n="$(nproc)" 'BEGIN { s = 60 * log(n) + 60; printf "%d", s < 120 ? 120 : s }')}
BENCH_LOADAVG=${HPS_BENCH_LOADAVG:-/proc/loadavg} # (tests/cli/bench.bats gives a file of its own)
BENCH_SPREAD_MAX=${BENCH_SPREAD_MAX:-0.05} # coefficient of variation of one configuration's runs
BENCH_MIN_S=${BENCH_MIN_S:-5}         # seconds each run lasts at least
BENCH_OTHER_MAX=5                     # % of the machine's CPU other processes used: above it, noisy

bench_cpu() {
    m=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
    echo "${m:-$(uname -m)}, $(nproc) cores"
}

bench_load() { cut -d' ' -f1 "$BENCH_LOADAVG"; }
bench_loads() { cut -d' ' -f1-3 "$BENCH_LOADAVG"; }

# The machine's busy CPU seconds so far (every core: user, nice, system, irq,
# softirq, steal of /proc/stat), and this shell's and its waited-for
# descendants' (times: run here, not in a subshell, which starts from zero).
bench_busy_s() { awk -v hz="$(getconf CLK_TCK)" '/^cpu / { print ($2 + $3 + $4 + $7 + $8 + $9) / hz }' /proc/stat; }
bench_own_s() { # into BENCH_OWN
    times > "$BENCH_TIMES_FILE"
    BENCH_OWN=$(awk '{ for (i = 1; i <= NF; i++) { split($i, p, "m"); s += p[1] * 60 + p[2] } } END { print s }' \
        "$BENCH_TIMES_FILE")
}

# bench_other: into BENCH_OTHER "share seconds wall", the CPU that processes
# other than the bench's used while it ran, as a share of the machine (% of
# the wall time times the cores): the load average counts the bench's own
# threads (2 on 2 cores hold it near 2), this only the others'.
# Called as is, not in a $(...): bench_own_s reads this shell's times.
bench_other() {
    bench_own_s
    BENCH_OTHER=$(awk -v b0="$BENCH_BUSY0" -v b1="$(bench_busy_s)" -v o0="$BENCH_OWN0" -v o1="$BENCH_OWN" \
        -v t0="$BENCH_T0" -v t1="$(date +%s.%N)" -v n="$(nproc)" \
        'BEGIN { o = (b1 - b0) - (o1 - o0); if (o < 0) o = 0; w = t1 - t0
                 printf "%.1f %.1f %.0f\n", 100 * o / (w * n), o, w }')
}

# bench_noisy REASON: the result is marked noisy, for REASON
bench_noisy() { echo "$1" >> "$BENCH_NOISY_FILE"; }

# bench_settle: waits, BENCH_SETTLE_S seconds at most, for the 1-minute load
# to fall to BENCH_QUIET_LOAD, into BENCH_WAITED the seconds it waited.  The
# load average counts runnable threads, the bench's own too: its 2 threads
# on 2 cores hold it near 2 while it runs, and it decays to 1 about 42 s
# after they stop (a 1-minute average), so the load says whether anything
# else runs only before a bench's runs and once they have decayed.  While
# it runs, the CPU other processes use says it (bench_other).
bench_settle() {
    BENCH_WAITED=0 # the seconds slept (bench_common.py counts them alike)
    while awk -v l="$(bench_load)" -v m="$BENCH_QUIET_LOAD" 'BEGIN { exit !(l > m) }' &&
        [ "$BENCH_WAITED" -lt "$BENCH_SETTLE_S" ]; do
        sleep 1
        BENCH_WAITED=$((BENCH_WAITED + 1))
    done
}

# bench_quiet_load WHEN: the settled load, "X Y Z" of the load averages (and
# how long it waited) into BENCH_LOAD_SAID; noisy when the 1-minute one is
# above BENCH_QUIET_LOAD
bench_quiet_load() {
    BENCH_LOAD_SAID=$(bench_loads) # one reading, said and judged
    l=${BENCH_LOAD_SAID%% *}
    [ "$BENCH_WAITED" -gt 0 ] && BENCH_LOAD_SAID="$BENCH_LOAD_SAID (after $BENCH_WAITED s at rest)"
    if awk -v l="$l" -v m="$BENCH_QUIET_LOAD" 'BEGIN { exit !(l > m) }'; then
        bench_noisy "load $l at $1 > $BENCH_QUIET_LOAD after $BENCH_WAITED s at rest"
    fi
}

# bench_begin NAME [untimed]: waits for any other bench and (unless
# untimed: sizes and quality, which the load does not move) for the load to
# settle, then names the CPU and the load
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
    BENCH_TIMES_FILE=$(mktemp "${TMPDIR:-/tmp}/hps-bench-times.XXXXXX")
    BENCH_WAITED=0
    if [ "${2:-}" = untimed ]; then
        BENCH_LOAD_SAID=$(bench_loads)
    else
        bench_settle
        bench_quiet_load start
    fi
    echo "$BENCH_NAME: cpu: $(bench_cpu); load at start: $BENCH_LOAD_SAID"
    bench_own_s
    BENCH_T0=$(date +%s.%N) BENCH_BUSY0=$(bench_busy_s) BENCH_OWN0=$BENCH_OWN
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

# bench_end: the CPU other processes used while the runs ran, the load
# right after them and once the bench's own has decayed, and the verdict,
# "quiet" or "NOISY: why"
bench_end() {
    bench_other
    set -- $BENCH_OTHER
    after=$(bench_load)
    bench_settle
    bench_quiet_load end
    echo "$BENCH_NAME: cpu: $(bench_cpu); load right after the runs: $after, at end: $BENCH_LOAD_SAID; other processes: $1% of the CPU ($2 s of $3 s on $(nproc) cores)"
    if awk -v o="$1" -v m="$BENCH_OTHER_MAX" 'BEGIN { exit !(o > m) }'; then
        bench_noisy "other processes used $1% of the CPU > $BENCH_OTHER_MAX%"
    fi
    if [ -s "$BENCH_NOISY_FILE" ]; then
        echo "$BENCH_NAME: NOISY: $(sort -u "$BENCH_NOISY_FILE" | paste -sd ';' - | sed 's/;/; /g')"
    else
        echo "$BENCH_NAME: quiet: load <= $BENCH_QUIET_LOAD at start and at end; other processes <= $BENCH_OTHER_MAX% of the CPU while it ran; every configuration's runs within $(awk -v m="$BENCH_SPREAD_MAX" 'BEGIN { printf "%.0f", 100 * m }')% (sd/mean)"
    fi
    rm -f "$BENCH_NOISY_FILE" "$BENCH_TIMES_FILE"
}
