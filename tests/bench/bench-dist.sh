#!/bin/sh
# make bench-dist: hps-train across ranks on this machine (not in make check).
#   epoch time of 1 and 2 workers (each with 1 server rank), and, with worker
#   rank 1 slowed 2x (--slowdown 1=2), static equal shares against re-balanced
#   ones beside the ideal time computed from the two workers' measured speeds:
#   rows / (v_fast + v_slow), speeds as samples per compute second; and the
#   plan's two stages on different ranks (plan-dist-2s-3r.json).
# Epoch times are the lead's wall seconds per epoch after a warm-up epoch is
# excluded by running 3 epochs and reporting the total / 3 (small data, so
# start-up is part of it; the same for every row of the table).
set -eu
BIN=${1:?usage: bench-dist.sh BIN_DIR}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ROWS=${ROWS:-30000}
EPOCHS=${EPOCHS:-3}
. "$ROOT/tests/bench/bench_common.sh"
bench_begin bench-dist
TMP=$(mktemp -d)
trap 'rm -rf "$TMP" "$BENCH_NOISY_FILE" "$BENCH_TIMES_FILE"' EXIT
command -v mpirun >/dev/null || { echo "bench-dist: mpirun is not installed (make deps)" >&2; exit 1; }
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
# the test build of hps-train (make bench-dist passes it): it has --slowdown
TRAIN=${HPS_TEST_BIN:?run it as make bench-dist (the test build has --slowdown)}/hps-train
MODEL=$ROOT/testdata/models/demo-ctr.json
PLAN2=$ROOT/testdata/plans/plan-dist-2w1s.json
"$BIN/hps-shard" synth "$ROWS" -o "$TMP/x.tsv" 2>/dev/null
"$BIN/hps-shard" -m "$MODEL" -n 2 -o "$TMP/shards" "$TMP/x.tsv" 2>/dev/null
# the same plan with one worker (rank 0) and the server on rank 1
python3 - "$PLAN2" "$TMP/plan1.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["workers"] = p["workers"][:1]
p["servers"]["ranks"] = [1]
p["inputs"]["model"] = sys.argv[1].rsplit("/", 2)[0] + "/models/demo-ctr.json"
json.dump(p, open(sys.argv[2], "w"))
PY

run() { # NAME NP PLAN ARGS...
    name=$1 np=$2 plan=$3
    shift 3
    timeout 600 mpirun --oversubscribe -np "$np" "$TRAIN" --plan "$plan" --model "$MODEL" \
        --data "$TMP/shards" --epochs "$EPOCHS" --threads 1 --metrics "$TMP/$name.ndjson" -q "$@"
}

run one 2 "$TMP/plan1.json"
run two 3 "$PLAN2" --no-rebalance
run static 3 "$PLAN2" --no-rebalance --slowdown 1=2
run rebal 3 "$PLAN2" --slowdown 1=2
# the plan's 2 stages on different ranks (layers 0-3, 4-6), 4 micro-batches
run stages 3 "$ROOT/testdata/plans/plan-dist-2s-3r.json" --micro-batches 4

python3 - "$TMP" "$ROWS" "$EPOCHS" <<'PY'
import json, sys
tmp, rows, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def load(name):
    recs = [json.loads(l) for l in open(f"{tmp}/{name}.ndjson")]
    summ = [r for r in recs if r["event"] == "summary"][-1]
    dist = [r for r in recs if r["event"] == "dist"][-1]
    return summ, dist
res = {n: load(n) for n in ("one", "two", "static", "rebal", "stages")}
def epoch_s(n): return res[n][0]["seconds"] / epochs
def crit(n): return res[n][1]["critical_s"] / epochs
w = [r for r in res["static"][1]["per_rank"] if r["role"] == "worker"]
v_fast, v_slow = w[0]["samples_per_s"], w[1]["samples_per_s"]
ideal_compute = rows / (v_fast + v_slow)
# the wall time also holds communication: take it from the static run, per epoch
overhead = epoch_s("static") - crit("static")
print(f"rows per epoch {rows}, batch 1024, demo-ctr, --threads 1, ranks on one 2-core host")
print(f"measured speeds with --slowdown 1=2: worker 0 {v_fast:.0f} samples/s, worker 1 {v_slow:.0f} samples/s")
print()
print("| run | ranks | epoch s (wall) | slowest worker's compute s/epoch | final shares |")
print("|---|---|---|---|---|")
for n, label, ranks in (("one", "1 worker + 1 server", 2), ("two", "2 workers + 1 server", 3),
                        ("static", "2 workers, rank 1 slowed 2x, static shares", 3),
                        ("rebal", "2 workers, rank 1 slowed 2x, re-balanced", 3),
                        ("stages", "2 stages on 1+1 workers (layers 0-3, 4-6), 4 micro-batches", 3)):
    shares = "/".join(f'{r["share"]:.2f}' for r in res[n][1]["per_rank"] if r["role"] == "worker")
    print(f"| {label} | {ranks} | {epoch_s(n):.3f} | {crit(n):.3f} | {shares} |")
print(f"| ideal from the two speeds: rows / (v0 + v1) | | {ideal_compute + overhead:.3f} (+ static run's comm) | {ideal_compute:.3f} | {v_fast/(v_fast+v_slow):.2f}/{v_slow/(v_fast+v_slow):.2f} |")
print()
print(f"re-balanced compute vs ideal: {crit('rebal') / ideal_compute:.2f}x; static vs ideal: {crit('static') / ideal_compute:.2f}x")
PY
bench_end
