#!/bin/sh
# make demo: the whole hps pipeline on data it makes itself, through the
# copyable Makefile in testdata/pipeline.  $1 is the directory of the binaries.
set -eu
bin=$1
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/demo-out
mkdir -p "$out"
cd "$out"

say() { printf '\n== %s\n' "$*" >&2; }

say "data: 200000 synthetic Criteo rows with a planted model (hps-shard synth)"
[ -s data.tsv ] || "$bin/hps-shard" synth 200000 --seed 1 --scale 0.01 --meta synth.json -o data.tsv
# copied only when they differ, so that a second `make demo` redoes nothing
fresh() { cmp -s "$1" "$2" || cp "$1" "$2"; }
fresh "$root/testdata/models/demo-ctr.json" model.json
fresh "$root/testdata/clusters/lab.json" cluster.json
fresh "$root/testdata/devices/gpu-t4.json" gpu-t4.json

say "pipeline: profile -> plan -> shards -> train (testdata/pipeline/Makefile)"
make --no-print-directory -f "$root/testdata/pipeline/Makefile" HPS="$bin/" \
    GPUS=gpu-t4.json MIN_THROUGHPUT=20000 TRAIN_FLAGS="--cpu-fallback --threads 2" all plan.svg curves.svg

say "the profile (this machine measured, the T4 estimated from its spec sheet)"
"$bin/hps-profile" show profile.json --format table
say "the plan"
cat plan.txt
say "training"
python3 - metrics.ndjson synth.json <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
s = [r for r in recs if r["event"] == "summary"][-1]
planted = json.load(open(sys.argv[2]))["planted_auc"]
print(f"{s['steps']} steps, {s['samples']} samples, {s['samples_per_s']:.0f} samples/s on the CPU")
if "eval" in s:
    e = s["eval"]
    print(f"held-out: logloss {e['logloss']:.4f}, AUC {e['auc']:.4f} (the planted model's AUC: {planted:.4f})")
PY
echo "everything is in $out" >&2
