#!/bin/sh
# make bench-train: hps-train against PyTorch on three models, same rows, same
# threads, same OpenBLAS kernels: demo-ctr and dlrm-criteo on Criteo-like rows
# (hps-shard synth), and a dense MLP 784-256-128-10 on MNIST-shaped libsvm rows.
# Per model: samples/s of both (median of REPS runs, hps and PyTorch
# alternating), their ratio, held-out logloss (or accuracy), and both as a
# fraction of the sgemm-bound ceiling: the samples/s at which the dense
# layers' FLOPs (fc and the dot interaction) alone would take all the time at
# the sgemm rate measured in this run.  Run r seeds both sides with r and the
# quality is the mean over the runs: on dlrm-criteo one seed's held-out
# logloss spreads over +-0.5% on either side, more than the gap measured.
# ROWS (Criteo rows, default 300000), MLP_ROWS (default 60000), THREADS
# (default: all cores), REPS (default 3) and MODELS can be set.
set -eu
bin=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
rows=${ROWS:-300000}
mlp_rows=${MLP_ROWS:-60000}
threads=${THREADS:-$(nproc)}
reps=${REPS:-3}
models=${MODELS:-demo-ctr dlrm-criteo mlp-784}
py=/usr/bin/python3
$py -c 'import torch' 2>/dev/null || { echo "bench-train: needs Debian's python3-torch (make deps)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
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
    case $name in
    mlp-*) "$bin/hps-shard" -q --format libsvm --classes 10 --dense 784 --transform none -m "$model" \
               --holdout 0.1 -o "$d/shards" "$work/mnist.svm" ;;
    *) "$bin/hps-shard" -q -m "$model" --holdout 0.1 -o "$d/shards" "$work/criteo.tsv" ;;
    esac
    "$bin/hps-shard" cat --as tsv "$d/shards/shard-00000.hps" > "$d/train.tsv"
    "$bin/hps-shard" cat --as tsv "$d/shards/holdout.hps" > "$d/holdout.tsv"
    "$bin/hps-train" --model "$model" --data "$d/shards" --threads "$threads" --probe 20 -q \
        -o "$d/probe.json"
    for r in $(seq "$reps"); do
        echo "bench-train: $name, run $r of $reps" >&2
        "$bin/hps-train" --model "$model" --data "$d/shards" --eval "$d/shards" \
            --threads "$threads" --seed "$r" -q --metrics "$d/hps-$r.ndjson"
        $py "$root/tests/bench/bench_train_torch.py" "$model" "$d/train.tsv" "$d/holdout.tsv" \
            "$threads" "$r" > "$d/torch-$r.json"
    done
done

$py - "$work" "$reps" $models <<'PY'
import json, statistics, sys
work, reps, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]


def quality(key, xs):
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{key[:3]} {statistics.mean(xs):.4f}+-{sd:.4f}"


print(f"{'model':12} {'hps samples/s':>13} {'torch':>9} {'ratio':>6} {'hps quality':>19} "
      f"{'torch quality':>19} {'hps ceil':>8} {'torch ceil':>10} {'sgemm GF/s':>10} {'fc GF/s':>8}")
for name in models:
    d = f"{work}/{name}"
    hps = [[json.loads(l) for l in open(f"{d}/hps-{r}.ndjson") if '"summary"' in l][-1]
           for r in range(1, reps + 1)]
    torch = [json.load(open(f"{d}/torch-{r}.json")) for r in range(1, reps + 1)]
    probe = json.load(open(f"{d}/probe.json"))
    dev = probe["devices"][-1]
    fc = [l for l in dev["layers"] if l["type"] == "fc"]
    dense = fc + [l for l in dev["layers"] if l["type"] == "dot_interaction"]
    flops = sum(l["flops_forward"] + l["flops_backward"] for l in dense)
    fc_flops = sum(l["flops_forward"] + l["flops_backward"] for l in fc)
    ms = sum(l["forward_ms"]["median"] + l["backward_ms"]["median"] for l in fc)
    ceiling = dev["sgemm_gflops"] * 1e9 / (flops / probe["model"]["batch"])
    hs = statistics.median(h["samples_per_s"] for h in hps)
    ts = statistics.median(t["samples_per_s"] for t in torch)
    multi = hps[-1]["eval"]["accuracy"] is not None
    key = "accuracy" if multi else "logloss"
    hq = quality(key, [h["eval"][key] for h in hps])
    tq = quality(key, [t[key] for t in torch])
    print(f"{name:12} {hs:13.0f} {ts:9.0f} {hs / ts:5.2f}x {hq:>19} {tq:>19} "
          f"{100 * hs / ceiling:7.0f}% {100 * ts / ceiling:9.0f}% {dev['sgemm_gflops']:10.1f} "
          f"{fc_flops / ms / 1e6:8.1f}")
print("samples/s: median of the runs; quality: held-out logloss (log) or accuracy (acc), mean "
      "+- sd over the runs' seeds; ceil: share of the sgemm-bound ceiling (fc and dot FLOPs); "
      "fc GF/s: the fc layers alone (probe)")
PY
