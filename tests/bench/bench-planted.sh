#!/bin/sh
# make bench-planted: do the model families separate where they should?
# `hps-shard synth --interactions 8` plants 8 second-order interactions
# between slot pairs (a product of two zero-mean effects, which a linear model
# cannot see); LR (a linear layer alone), DNN (wide-deep's deep part alone),
# Wide&Deep, DeepFM, DCN and DCN-v2 are trained one epoch on ROWS rows (default
# 2000000) and evaluated on the next EVAL_ROWS (200000), SEEDS seeds each (1 2).
# Per model: held-out AUC and logloss per seed and their mean; the planted
# model's own AUC (what a perfect model scores) from synth.  Quality only,
# nothing timed: the load does not make it noisy (the lock and CPU are named).
#   tests/bench/bench-planted.sh BIN_DIR       (make bench-planted)
#   ROWS=200000 EVAL_ROWS=20000 SEEDS=1 tests/bench/bench-planted.sh bin   (quick)
set -eu
bin=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
rows=${ROWS:-2000000}
eval_rows=${EVAL_ROWS:-200000}
seeds=${SEEDS:-1 2}
. "$root/tests/bench/bench_common.sh"
bench_begin bench-planted untimed
work=$(mktemp -d)
trap 'rm -rf "$work" "$BENCH_NOISY_FILE" "$BENCH_TIMES_FILE"' EXIT
models=$root/testdata/models
# LR and DNN: wide-deep's two parts, each alone (same slots, dims and widths)
python3 - "$models/wide-deep.json" "$work" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
L = {l["name"]: l for l in m["layers"]}
json.dump(dict(m, name="lr", layers=[dict(L["wide"], name="logit"), L["loss"]]), open(sys.argv[2] + "/lr.json", "w"))
json.dump(dict(m, name="dnn", layers=[L["emb"], L["deep_in"], L["fc1"], L["fc2"], dict(L["deep"], name="logit"),
                                      L["loss"]]), open(sys.argv[2] + "/dnn.json", "w"))
PY
"$bin/hps-shard" synth $((rows + eval_rows)) --seed 1 --interactions 8 -o "$work/all.tsv" 2> "$work/synth.txt"
head -n "$rows" "$work/all.tsv" > "$work/train.tsv"
tail -n "$eval_rows" "$work/all.tsv" > "$work/eval.tsv"
rm "$work/all.tsv"
"$bin/hps-shard" -q -m "$work/lr.json" -o "$work/train" "$work/train.tsv"
"$bin/hps-shard" -q -m "$work/lr.json" -o "$work/eval" "$work/eval.tsv"
rm "$work/train.tsv" "$work/eval.tsv"
echo "bench-planted: $rows training rows, $eval_rows held out, one epoch, seeds $seeds; $(sed 's/^hps-shard: synth: //' "$work/synth.txt")"
printf '%-16s %-26s %-26s %s\n' model "AUC per seed" "logloss per seed" "mean AUC"
for m in "$work/lr.json" "$work/dnn.json" "$models/wide-deep.json" "$models/deepfm.json" "$models/dcn.json" \
    "$models/dcn-v2-parallel.json"; do
    name=$(basename "$m" .json)
    for s in $seeds; do
        "$bin/hps-train" -m "$m" --data "$work/train" --eval "$work/eval" --threads "$(nproc)" --seed "$s" -q \
            --metrics "$work/$name.$s.ndjson"
    done
    python3 - "$name" "$work" $seeds <<'PY'
import json, sys
name, work, seeds = sys.argv[1], sys.argv[2], sys.argv[3:]
ev = [json.loads(open("%s/%s.%s.ndjson" % (work, name, s)).readlines()[-1])["eval"] for s in seeds]
auc = " ".join("%.4f" % e["auc"] for e in ev)
ll = " ".join("%.4f" % e["logloss"] for e in ev)
print("%-16s %-26s %-26s %.4f" % (name, auc, ll, sum(e["auc"] for e in ev) / len(ev)))
PY
done
echo "bench-planted: cpu: $(bench_cpu); load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
