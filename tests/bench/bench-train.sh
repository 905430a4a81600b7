#!/bin/sh
# make bench-train: hps-train against PyTorch, same rows, same threads, same
# OpenBLAS kernels: demo-ctr, dlrm-criteo and the graphs wide-deep, deepfm,
# dcn-v2-parallel and dlrm-dcn on Criteo-like rows (hps-shard synth), a dense
# MLP 784-256-128-10 on MNIST-shaped libsvm rows, and demo-ctr-kaggle (below).
# Per model: samples/s of both (mean +- sd of REPS runs, hps and PyTorch
# alternating run by run, each first in turn), their ratio, held-out logloss
# (or accuracy) and AUC (a binary label), and both as a fraction of the sgemm-bound ceiling: the
# samples/s at which the dense layers' FLOPs (fc and the dot interaction)
# alone would take all the time at the sgemm rate measured in this run.  Run r
# seeds both sides with r and the quality is the mean over the runs: on
# dlrm-criteo one seed's held-out logloss spreads over +-0.5% on either side,
# more than the gap measured.  A run lasts at least BENCH_MIN_S seconds (5):
# a timed warm-up run of hps-train sets the epochs both sides train.  Quality
# is each side's held-out eval after the FIRST epoch (hps-train --eval's first
# eval record, bench_train_torch.py's "epochs"[0]): the CTR models overfit from
# the second pass on (dcn-v2-parallel on 300000 rows: held-out logloss 0.376
# after one epoch, 0.61-0.65 after three), and there a seed's initial draw
# moves it by several percent either way on both sides (hps seed 1 7% above
# PyTorch's, seed 2 1% below), so no 0.5% comparison can be made; from the same
# initial weights the two trainers agree epoch by epoch (graph.bats).  The
# CPU, the load at start and end, and the verdict "quiet" or "NOISY: why"
# (the load above 1 at start or end, other processes above 5% of the CPU,
# or one side's runs spread more than BENCH_SPREAD_MAX, 5%, sd/mean) come with the table (bench_common.sh).  Under it, per CTR model
# (a binary label), the issue's targets: hps's held-out logloss against
# PyTorch's in percent (within 0.5%) and the samples/s ratio (1.5x).
# demo-ctr-kaggle is demo-ctr's network with every slot hashed unbounded
# (buckets 2^40) on KAGGLE_ROWS rows (default 1000000) of `hps-shard synth
# --cardinality kaggle`: keys as many as the Criteo Kaggle set's, so the
# tables grow to a million rows and more.
# ROWS (Criteo rows, default 300000), MLP_ROWS (default 60000), KAGGLE_ROWS,
# THREADS (default: all cores), REPS (default 3) and MODELS can be set.
set -eu
bin=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
rows=${ROWS:-300000}
mlp_rows=${MLP_ROWS:-60000}
kaggle_rows=${KAGGLE_ROWS:-1000000}
threads=${THREADS:-$(nproc)}
reps=${REPS:-3}
models=${MODELS:-demo-ctr dlrm-criteo mlp-784 wide-deep deepfm dcn-v2-parallel dlrm-dcn demo-ctr-kaggle}
py=/usr/bin/python3
$py -c 'import torch' 2>/dev/null || { echo "bench-train: needs Debian's python3-torch (make deps)" >&2; exit 1; }
. "$root/tests/bench/bench_common.sh"
bench_begin bench-train
work=$(mktemp -d)
trap 'rm -rf "$work" "$BENCH_NOISY_FILE" "$BENCH_TIMES_FILE"' EXIT
# PyTorch loads the same OpenBLAS: give it the kernels hps-train runs with
core=$("$bin/hps-train" --version | sed -n 's/^blas: openblas //p')
export OPENBLAS_CORETYPE=$core
# and the OpenMP waits hps-train sets for itself (hps(7)): spinning threads
# would measure the machine's other load, not the model
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

"$bin/hps-shard" synth "$rows" --seed 1 -o "$work/criteo.tsv" 2>/dev/null
$py "$root/tests/bench/make_dense_libsvm.py" "$mlp_rows" 1 > "$work/mnist.svm"
echo "bench-train: $threads threads, OpenBLAS $core kernels, OMP_WAIT_POLICY=$OMP_WAIT_POLICY, $reps runs each; load: $(uptime | sed 's/.*load/load/')" >&2

for name in $models; do
    model=$root/testdata/models/$name.json
    d=$work/$name
    mkdir "$d"
    if [ "$name" = demo-ctr-kaggle ]; then
        model=$work/demo-ctr-kaggle.json
        $py - "$root/testdata/models/demo-ctr.json" "$model" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["name"] = "demo-ctr-kaggle"
m["input"]["slots"] = [{"name": s["name"], "buckets": 1 << 40} for s in m["input"]["slots"]]
json.dump(m, open(sys.argv[2], "w"))
PY
        "$bin/hps-shard" synth "$kaggle_rows" --seed 1 --cardinality kaggle -o "$work/kaggle.tsv" 2>/dev/null
    fi
    case $name in
    mlp-*) "$bin/hps-shard" -q --format libsvm --classes 10 --dense 784 --transform none -m "$model" \
               --holdout 0.1 -o "$d/shards" "$work/mnist.svm" ;;
    demo-ctr-kaggle) "$bin/hps-shard" -q -m "$model" --holdout 0.1 -o "$d/shards" "$work/kaggle.tsv" ;;
    *) "$bin/hps-shard" -q -m "$model" --holdout 0.1 -o "$d/shards" "$work/criteo.tsv" ;;
    esac
    "$bin/hps-shard" cat --as tsv "$d/shards/shard-00000.hps" > "$d/train.tsv"
    "$bin/hps-shard" cat --as tsv "$d/shards/holdout.hps" > "$d/holdout.tsv"
    "$bin/hps-train" --model "$model" --data "$d/shards" --threads "$threads" --probe 20 -q \
        -o "$d/probe.json"
    # the warm-up run (not counted) times an epoch: enough epochs for BENCH_MIN_S
    "$bin/hps-train" --model "$model" --data "$d/shards" --threads "$threads" -q --metrics "$d/warm.ndjson"
    epochs=$($py -c 'import json, math, sys
s = [json.loads(l) for l in open(sys.argv[1]) if "\"summary\"" in l][-1]["seconds"]
print(max(1, math.ceil(float(sys.argv[2]) / max(s, 1e-3))))' "$d/warm.ndjson" "$BENCH_MIN_S")
    echo "$epochs" > "$d/epochs"
    for r in $(seq "$reps"); do
        echo "bench-train: $name, run $r of $reps, $epochs epoch(s); load $(bench_load)" >&2
        hps_run() {
            "$bin/hps-train" --model "$model" --data "$d/shards" --eval "$d/shards" --epochs "$epochs" \
                --threads "$threads" --seed "$r" -q --metrics "$d/hps-$r.ndjson"
        }
        torch_run() {
            $py "$root/tests/bench/bench_train_torch.py" "$model" "$d/train.tsv" "$d/holdout.tsv" \
                "$threads" "$r" "$epochs" > "$d/torch-$r.json"
        }
        if [ $((r % 2)) = 1 ]; then hps_run; torch_run; else torch_run; hps_run; fi
    done
done

PYTHONPATH=$root/tests/bench $py - "$work" "$reps" $models <<'PY'
import json, statistics, sys
import bench_common
work, reps, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]


def quality(key, xs):
    m, sd, _ = bench_common.stats(xs)
    return f"{key[:3]} {m:.4f}+-{sd:.4f}"


def auc(xs):
    if any(x is None for x in xs):
        return "-"  # a multiclass label: no AUC
    m, sd, _ = bench_common.stats(xs)
    return f"{m:.4f}+-{sd:.4f}"


print(f"{'model':12} {'ep':>3} {'hps samples/s':>17} {'torch':>17} {'ratio':>6} {'hps quality':>19} "
      f"{'torch quality':>19} {'hps AUC':>15} {'torch AUC':>15} {'hps ceil':>8} {'torch ceil':>10} "
      f"{'sgemm GF/s':>10} {'fc GF/s':>8}")
targets = []
for name in models:
    d = f"{work}/{name}"
    hps = [[json.loads(l) for l in open(f"{d}/hps-{r}.ndjson") if '"summary"' in l][-1]
           for r in range(1, reps + 1)]
    torch = [json.load(open(f"{d}/torch-{r}.json")) for r in range(1, reps + 1)]
    # quality after the first epoch, both sides (see the header)
    hq1 = [next(e for e in map(json.loads, open(f"{d}/hps-{r}.ndjson")) if e["event"] == "eval")
           for r in range(1, reps + 1)]
    tq1 = [t["epochs"][0] for t in torch]
    probe = json.load(open(f"{d}/probe.json"))
    dev = probe["devices"][-1]
    fc = [l for l in dev["layers"] if l["type"] == "fc"]
    dense = fc + [l for l in dev["layers"] if l["type"] == "dot_interaction"]
    flops = sum(l["flops_forward"] + l["flops_backward"] for l in dense)
    fc_flops = sum(l["flops_forward"] + l["flops_backward"] for l in fc)
    ms = sum(l["forward_ms"]["median"] + l["backward_ms"]["median"] for l in fc)
    ceiling = dev["sgemm_gflops"] * 1e9 / (flops / probe["model"]["batch"])
    hs, hsd, _ = bench_common.stats([h["samples_per_s"] for h in hps])
    ts, tsd, _ = bench_common.stats([t["samples_per_s"] for t in torch])
    bench_common.spread(f"{name} hps-train", [h["samples_per_s"] for h in hps])
    bench_common.spread(f"{name} PyTorch", [t["samples_per_s"] for t in torch])
    epochs = open(f"{d}/epochs").read().strip()
    multi = hps[-1]["eval"]["accuracy"] is not None
    key = "accuracy" if multi else "logloss"
    hq = quality(key, [h[key] for h in hq1])
    tq = quality(key, [t[key] for t in tq1])
    ha = auc([None if multi else h["auc"] for h in hq1])
    ta = auc([None if multi else t["auc"] for t in tq1])
    print(f"{name:12} {epochs:>3} {hs:9.0f}+-{hsd:<6.0f} {ts:9.0f}+-{tsd:<6.0f} {hs / ts:5.2f}x {hq:>19} {tq:>19} "
          f"{ha:>15} {ta:>15} {100 * hs / ceiling:7.0f}% {100 * ts / ceiling:9.0f}% {dev['sgemm_gflops']:10.1f} "
          f"{fc_flops / ms / 1e6:8.1f}")
    if not multi:
        hl = statistics.mean(h["logloss"] for h in hq1)
        tl = statistics.mean(t["logloss"] for t in tq1)
        targets.append((name, 100 * (hl - tl) / tl, hs / ts))
print("ep: epochs a run; samples/s: mean +- sd of the runs; quality: held-out logloss (log) or accuracy (acc) after "
      "the first epoch, mean +- sd over the runs' seeds; AUC: held-out after the first epoch, mean +- sd over the "
      "seeds (a binary label); "
      "ceil: share of the sgemm-bound ceiling (fc and dot FLOPs); fc GF/s: the fc layers alone (probe)")
# the issue's targets for a CTR model: logloss within 0.5% of PyTorch's, 1.5x its samples/s
for name, gap, ratio in targets:
    print(f"{name}: logloss {gap:+.2f}% against PyTorch ({'within' if abs(gap) <= 0.5 else 'NOT within'} the "
          f"0.5% target); samples/s {ratio:.2f}x ({'meets' if ratio >= 1.5 else 'BELOW'} the 1.5x target)")
PY
bench_end
