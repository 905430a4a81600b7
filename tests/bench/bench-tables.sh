#!/bin/sh
# bench-tables: embedding tables that live for months, the production
# protocol (issue 32): BENCH_DAYS synthetic days with drift (hps-shard synth
# --days), trained day after day (hps-train --continue-from), each day
# evaluated on the next day's data.  Per configuration and day: the table
# rows, their MiB, the smallest table's admitted share of the day's lookups,
# the rows removed so far (evicted or expired), the bytes of the day's delta export, and the next-day
# logloss and AUC; then base + the deltas (hps-train export-apply) compared
# byte for byte with the last day's full export.
#
#   tests/bench/bench-tables.sh BIN_DIR              (make bench-tables)
#   BENCH_DAYS=3 BENCH_ROWS=20000 tests/bench/bench-tables.sh bin   (a quick run)
#
# BENCH_DAYS (default 30), BENCH_ROWS rows a day (default 200000),
# BENCH_SCALE the vocabulary scale (default 0.01), BENCH_DRIFT (default 0.1),
# BENCH_MODEL (default testdata/models/demo-ctr.json), BENCH_THREADS (2).
# Not timed: the figures are sizes and quality, so the load does not make
# them noisy (the lock and the CPU are still named).
set -eu
bin=${1:?usage: bench-tables.sh BIN_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
days=${BENCH_DAYS:-30}
rows=${BENCH_ROWS:-200000}
scale=${BENCH_SCALE:-0.01}
drift=${BENCH_DRIFT:-0.1}
model=${BENCH_MODEL:-$root/testdata/models/demo-ctr.json}
threads=${BENCH_THREADS:-2}
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-tables.XXXXXX")
. "$root/tests/bench/bench_common.sh"
bench_begin bench-tables untimed
trap 'rm -rf "$work" "$BENCH_NOISY_FILE" "$BENCH_TIMES_FILE"' EXIT INT TERM

echo "bench-tables: $((days + 1)) days of $rows rows (scale $scale, drift $drift), model $(basename "$model")" >&2
"$bin/hps-shard" synth "$rows" --days $((days + 1)) --drift "$drift" --scale "$scale" --seed 1 \
    -T "$threads" -o "$work/days" 2> "$work/synth.log"
d=1
while [ "$d" -le $((days + 1)) ]; do
    dd=$(printf %02d "$d")
    "$bin/hps-shard" -q -m "$model" -T "$threads" -o "$work/s$dd" "$work/days/day-$dd"
    d=$((d + 1))
done

# config NAME [HPS-TRAIN OPTIONS]: one configuration, day after day; its
# rows of the table into $work/table.  A configuration is one line below.
config() {
    name=$1
    shift
    c=$work/$name
    mkdir -p "$c"
    d=1
    while [ "$d" -le "$days" ]; do
        dd=$(printf %02d "$d") next=$(printf %02d $((d + 1))) prev=$(printf %02d $((d - 1)))
        if [ "$d" -eq 1 ]; then
            "$bin/hps-train" -q -m "$model" -d "$work/s$dd" --eval "$work/s$next" --threads "$threads" \
                --checkpoint "$c/ck$dd" --export "$c/e$dd.safetensors" --metrics "$c/m$dd.ndjson" "$@"
        else
            "$bin/hps-train" -q -m "$model" -d "$work/s$dd" --eval "$work/s$next" --threads "$threads" \
                --continue-from "$c/ck$prev" --checkpoint "$c/ck$dd" --export "$c/e$dd.safetensors" \
                --delta "$c/d$dd.delta" --delta-since "$c/e$prev.safetensors" --metrics "$c/m$dd.ndjson" "$@"
            rm -rf "$c/ck$prev"
            if [ "$d" -gt 2 ]; then # day 1's export stays: the chain's base
                rm -f "$c/e$prev.safetensors" "$c/e$prev.safetensors.sha256"
            fi
        fi
        python3 - "$c/m$dd.ndjson" "$name" "$d" "$c/d$dd.delta" "$c/e$dd.safetensors" >> "$work/table" <<'PY'
import json, os, sys
s = [json.loads(l) for l in open(sys.argv[1]) if '"summary"' in l][-1]
rows = sum(t["rows"] for t in s["tables"])
mib = sum(t["mib"] for t in s["tables"])
gone = sum(t["evictions"] + t["expired"] for t in s["tables"])
ep = [r for r in map(json.loads, open(sys.argv[1])) if r["event"] == "epoch"]
shares = [t["admitted_share"] for t in ep[-1]["tables"]] if ep and "tables" in ep[-1] else []
share = min(shares) if shares and None not in shares else 1.0
delta = os.path.getsize(sys.argv[4]) / 2**20 if os.path.exists(sys.argv[4]) else float("nan")
full = os.path.getsize(sys.argv[5]) / 2**20
e = s["eval"]
print("%-6s %4s %10d %10.1f %8.3f %8d %10.1f %10.2f %8.4f %7.4f" % (sys.argv[2], sys.argv[3], rows, mib, share,
                                                    gone, full, delta, e["logloss"], e["auc"]))
PY
        d=$((d + 1))
    done
    # the serving store's side: day 1's export and every delta since
    last=$(printf %02d "$days")
    if [ "$days" -gt 1 ]; then
        "$bin/hps-train" export-apply "$c/e01.safetensors" $(ls "$c"/d*.delta | sort) -o "$c/applied.safetensors"
        if cmp -s "$c/applied.safetensors" "$c/e$last.safetensors"; then
            echo "$name: base + $((days - 1)) deltas: byte-identical to day $days's full export" >> "$work/chain"
        else
            echo "$name: base + $((days - 1)) deltas: DIFFER from day $days's full export" >> "$work/chain"
        fi
    fi
}

: > "$work/table"
: > "$work/chain"
config a                      # today's tables: unbounded, fp32 rows, per-element AdaGrad
config b --admit-after 2 --expire-after-days 7                     # (b) admission + expiry
config c --admit-after 2 --expire-after-days 7 --row-dtype fp16 --sparse-optimizer rowwise-adagrad # (c) (b) + compact rows

printf "\n%d days of %d rows, drift %s a day; logloss and AUC: on the next day's rows\n\n" "$days" "$rows" "$drift"
printf "%-6s %4s %10s %10s %8s %8s %10s %10s %8s %7s\n" config day rows "table MiB" admitted removed \
    "export MiB" "delta MiB" logloss AUC
cat "$work/table"
echo
cat "$work/chain"
echo "bench-tables: cpu: $(bench_cpu); load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
rm -f "$BENCH_NOISY_FILE"
