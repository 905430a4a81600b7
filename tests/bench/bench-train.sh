#!/bin/sh
# make bench-train: hps-train against PyTorch on the demo CTR model, same rows,
# same threads.  Prints samples/s of both, their ratio, the held-out logloss of
# both, and the dense part's GFLOP/s beside the sgemm rate hps-profile measures.
# ROWS (default 300000) and THREADS (default: all cores) can be set.
set -eu
bin=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
rows=${ROWS:-300000}
threads=${THREADS:-$(nproc)}
model=$root/testdata/models/demo-ctr.json
py=/usr/bin/python3
$py -c 'import torch' 2>/dev/null || { echo "bench-train: needs Debian's python3-torch (make deps)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$bin/hps-shard" synth "$rows" --seed 1 -o "$work/rows.tsv" 2>/dev/null
"$bin/hps-shard" -q -m "$model" --holdout 0.1 -o "$work/shards" "$work/rows.tsv"
"$bin/hps-shard" cat "$work/shards/shard-00000.hps" > "$work/train.tsv"
"$bin/hps-shard" cat "$work/shards/holdout.hps" > "$work/holdout.tsv"

echo "hps-train: $rows rows, demo-ctr (26 slots x 16, MLP 512-256-128), batch 1024, $threads threads" >&2
"$bin/hps-train" --model "$model" --data "$work/shards" --eval "$work/shards" --threads "$threads" \
    -q --metrics "$work/hps.ndjson"
"$bin/hps-train" --model "$model" --data "$work/shards" --threads "$threads" --probe 20 \
    -o "$work/probe.json"
echo "pytorch: the same rows, tensors preloaded" >&2
$py "$root/tests/bench/bench_train_torch.py" "$model" "$work/train.tsv" "$work/holdout.tsv" \
    "$threads" > "$work/torch.json"

$py - "$work/hps.ndjson" "$work/torch.json" "$work/probe.json" <<'PY'
import json, sys
hps = [json.loads(l) for l in open(sys.argv[1]) if '"summary"' in l][-1]
torch = json.load(open(sys.argv[2]))
probe = json.load(open(sys.argv[3]))["devices"][-1]
fc = [l for l in probe["layers"] if l["type"] == "fc"]
flops = sum(l["flops_forward"] + l["flops_backward"] for l in fc)
ms = sum(l["forward_ms"]["median"] + l["backward_ms"]["median"] for l in fc)
dense = flops / ms / 1e6
print(f"{'':24} {'samples/s':>12} {'held-out logloss':>17}")
print(f"{'hps-train':24} {hps['samples_per_s']:12.0f} {hps['eval']['logloss']:17.4f}")
print(f"{'pytorch ' + torch['torch']:24} {torch['samples_per_s']:12.0f} {torch['logloss']:17.4f}")
print(f"ratio hps/pytorch: {hps['samples_per_s'] / torch['samples_per_s']:.2f}x samples/s; "
      f"logloss differs by {100 * (hps['eval']['logloss'] / torch['logloss'] - 1):+.2f}%")
print(f"dense part (fc layers, forward+backward): {dense:.1f} GFLOP/s, "
      f"{100 * dense / probe['sgemm_gflops']:.0f}% of the {probe['sgemm_gflops']:.1f} GFLOP/s sgemm rate measured in the same run")
PY
