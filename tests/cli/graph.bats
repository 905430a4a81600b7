#!/usr/bin/env bats
# Model graphs (hps-model(5) version 2) through hps-train in one process:
# every CTR model of testdata learns, exports its parameters under the
# documented names, and dropout keeps runs reproducible and resumable.

load helpers

GRAPHS="wide-deep deepfm dcn dcn-v2-stacked dcn-v2-parallel dlrm-dcn"

setup_file() {
    export DATA=$BATS_FILE_TMPDIR/data
    mkdir -p "$DATA"
    "$HPS_BIN/hps-shard" synth 20000 --seed 3 --scale 0.001 -o "$DATA/rows.tsv" 2>/dev/null
    # the graphs share criteo-small's input, so one set of shards serves all
    "$HPS_BIN/hps-shard" -q -m "$TESTDATA/models/criteo-small.json" --holdout 0.1 -n 2 \
        -o "$DATA/shards" "$DATA/rows.tsv"
}

setup() {
    TMP=$(mktemp -d)
}

teardown() {
    rm -rf "$TMP"
}

@test "graph: every CTR model of testdata trains an epoch and learns (held-out AUC > 0.65)" {
    for m in $GRAPHS; do
        "$HPS_BIN/hps-train" --model "$TESTDATA/models/$m.json" --data "$DATA/shards" \
            --eval "$DATA/shards" --threads 1 -q --metrics "$TMP/$m.ndjson"
        run python3 -c 'import json,sys
s = [json.loads(l) for l in open(sys.argv[1])][-1]
assert s["event"] == "summary" and s["eval"]["auc"] > 0.65, s["eval"]' "$TMP/$m.ndjson"
        [ "$status" -eq 0 ] || { echo "$m: $output"; false; }
    done
}

@test "graph: the export names linear and cross parameters as hps-model(5) says" {
    for m in deepfm dcn dcn-v2-parallel dcn-v2-stacked; do
        "$HPS_BIN/hps-train" --model "$TESTDATA/models/$m.json" --data "$DATA/shards" \
            --threads 1 -q --steps 3 --export "$TMP/$m.safetensors"
    done
    run python3 - "$TMP" <<'PY'
import json, struct, sys
def shapes(name):
    f = open(f"{sys.argv[1]}/{name}.safetensors", "rb")
    h = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    return {k: v["shape"] for k, v in h.items() if k != "__metadata__"}
d = shapes("deepfm")
assert d["linear.dense.weight"] == [1, 13] and d["linear.bias"] == [1], d
assert d["linear.C1.weight"][1] == 1 and d["linear.C1.keys"][0] == d["linear.C1.weight"][0]
assert not any(k.startswith("fm.") for k in d), "fm has no parameters"
c = shapes("dcn")
assert [c[f"cross.{i}.weight"] for i in range(3)] == [[221]] * 3 and c["cross.2.bias"] == [221]
p = shapes("dcn-v2-parallel")
assert p["cross.1.u"] == [221, 32] and p["cross.1.v"] == [32, 221] and p["cross.1.bias"] == [221]
s = shapes("dcn-v2-stacked")
assert s["cross.0.weight"] == [221, 221] and "cross.2.weight" not in s
PY
    [ "$status" -eq 0 ] || { echo "$output"; false; }
}

@test "graph: dropout draws its masks from the seed: runs repeat, and a killed run resumes bit for bit" {
    args=(--model "$TESTDATA/models/dcn-v2-stacked.json" --data "$DATA/shards" --epochs 2 --threads 1)
    "$HPS_BIN/hps-train" "${args[@]}" -q --export "$TMP/a.safetensors"
    "$HPS_BIN/hps-train" "${args[@]}" -q --export "$TMP/b.safetensors"
    cmp "$TMP/a.safetensors" "$TMP/b.safetensors"
    "$HPS_BIN/hps-train" "${args[@]}" -q --seed 2 --export "$TMP/c.safetensors"
    ! cmp -s "$TMP/a.safetensors" "$TMP/c.safetensors"
    # and deepfm: a linear layer's table checkpoints and resumes as an embedding's
    "$HPS_BIN/hps-train" "${args[@]/dcn-v2-stacked/deepfm}" -q --export "$TMP/d.safetensors"
    for m in dcn-v2-stacked deepfm; do
        run env HPS_TRAIN_KILL_AT_STEP=97 "$HPS_TEST_BIN/hps-train" "${args[@]/dcn-v2-stacked/$m}" -q \
            --checkpoint "$TMP/ckpt-$m" --checkpoint-every 20
        [ "$status" -eq 137 ]
        run "$HPS_BIN/hps-train" "${args[@]/dcn-v2-stacked/$m}" --checkpoint "$TMP/ckpt-$m" \
            --checkpoint-every 20 --resume --export "$TMP/resumed-$m.safetensors"
        [ "$status" -eq 0 ] || { echo "$output"; false; }
        [[ "$output" == *"resuming at step 80"* ]] || { echo "$output"; false; }
    done
    cmp "$TMP/a.safetensors" "$TMP/resumed-dcn-v2-stacked.safetensors"
    cmp "$TMP/d.safetensors" "$TMP/resumed-deepfm.safetensors"
}

@test "graph: hps-profile times every CTR layer, and the GPU device model estimates them" {
    for m in deepfm dcn-v2-stacked dcn; do
        "$HPS_BIN/hps-profile" --machine "$(machine_profile)" -m "$TESTDATA/models/$m.json" --reps 2 --min-time 0 --warmup 0 \
            --estimate "$TESTDATA/devices/gpu-a100.json" --estimate "$TESTDATA/devices/gpu-t4.json" \
            > "$TMP/$m.json"
    done
    run python3 - "$TMP" <<'PY'
import json, sys
seen = set()
for m in ("deepfm", "dcn-v2-stacked", "dcn"):
    devs = {d["id"]: d for d in json.load(open(f"{sys.argv[1]}/{m}.json"))["devices"]}
    for dev in devs.values():
        for l in dev["layers"]:
            if l["type"] not in ("linear", "fm", "cross", "add", "dropout"):
                continue
            seen.add(l["type"])
            where = (m, dev["id"], l["name"])
            assert l["forward_ms"]["median"] > 0 and l["backward_ms"]["median"] > 0, where
            assert l["flops_forward"] > 0 and l["flops_backward"] > 0, where
            assert l["bytes_in"] > 0 and l["bytes_out"] > 0, where
            assert 0 <= l["batch_scaling"]["fixed_fraction"][0] <= 1, where
    cross = lambda d: next(l for l in devs[d]["layers"] if l["type"] == "cross")
    if "cross" in (l["type"] for l in devs["cpu"]["layers"]):
        # the estimate follows the device: more FLOP/s and bandwidth, a faster cross
        assert cross("gpu-a100")["forward_ms"]["median"] < cross("gpu-t4")["forward_ms"]["median"], m
        assert cross("cpu")["flops_forward"] == cross("gpu-a100")["flops_forward"]
assert seen == {"linear", "fm", "cross", "add", "dropout"}, seen
PY
    [ "$status" -eq 0 ] || { echo "$output"; false; }
}

@test "graph: one batch forward and backward agrees with PyTorch to 1e-5, tables' gradients too (weights from hps's export)" {
    /usr/bin/python3 -c 'import torch, numpy' 2>/dev/null || skip "no python3-torch (make deps)"
    head -n 256 "$DATA/rows.tsv" > "$TMP/one.tsv"
    checks=()
    for m in criteo-small demo-ctr dlrm-criteo $GRAPHS; do
        model=$TESTDATA/models/$m.json
        "$HPS_BIN/hps-shard" -q -m "$model" -n 1 -o "$TMP/$m" "$TMP/one.tsv"
        "$HPS_BIN/hps-shard" cat --as tsv "$TMP/$m" > "$TMP/$m.tsv"
        # a step that changes nothing exports the weights it ran with; the
        # same step by SGD at rate 1e4 exports them moved by 1e4 gradients,
        # and its checkpoint holds the tables' AdaGrad accumulators (g^2)
        common=(--model "$model" --data "$TMP/$m" --steps 1 --threads 1 --seed 1 --optimizer sgd -q)
        "$HPS_BIN/hps-train" "${common[@]}" --lr 1e-12 --lr-sparse 1e-12 --export "$TMP/$m.w0" \
            --metrics "$TMP/$m.ndjson"
        "$HPS_BIN/hps-train" "${common[@]}" --lr 1e4 --lr-sparse 1e4 --export "$TMP/$m.w1" \
            --checkpoint "$TMP/$m.ckpt"
        loss=$(python3 -c 'import json,sys; print(next(r["loss"] for r in map(json.loads, open(sys.argv[1])) if r["event"] == "step"))' "$TMP/$m.ndjson")
        checks+=("$model" "$TMP/$m.tsv" "$TMP/$m.w0" "$TMP/$m.w1" 1e4 "$loss" 1 "$TMP/$m.ckpt")
    done
    # one process checks every model: torch's import takes seconds
    run /usr/bin/python3 "$ROOT/tests/bench/bench_train_torch.py" --check "${checks[@]}"
    [ "$status" -eq 0 ] || { echo "$output"; false; }
    # a line a model, each of them checked
    [ "$(grep -c '"bad": 0}$' <<<"$output")" -eq $((${#checks[@]} / 8)) ] || { echo "$output"; false; }
}

@test "graph: from hps's initial weights, PyTorch trains each graph to hps's held-out logloss, epoch by epoch" {
    # The one-batch check above sees one step; this one sees the optimizers'
    # state over many (Adam's moments and step count, AdaGrad's accumulators,
    # rows first met later on).  Both sides start from the same weights, so the
    # runs differ by float rounding alone, not by a seed's draw.
    /usr/bin/python3 -c 'import torch, numpy' 2>/dev/null || skip "no python3-torch (make deps)"
    # 4000 rows: 14 steps an epoch, 42 in all, each optimizer's state over
    # many steps as with 8000 (make check's budget: torch's steps)
    head -n 4000 "$DATA/rows.tsv" > "$TMP/rows.tsv"
    models="dcn-v2-parallel deepfm wide-deep dcn dlrm-dcn"
    replays=()
    for m in $models; do
        model=$TESTDATA/models/$m.json
        "$HPS_BIN/hps-shard" -q -m "$model" --holdout 0.1 -o "$TMP/$m" "$TMP/rows.tsv"
        "$HPS_BIN/hps-shard" cat --as tsv "$TMP/$m/shard-00000.hps" > "$TMP/$m.train.tsv"
        "$HPS_BIN/hps-shard" cat --as tsv "$TMP/$m/holdout.hps" > "$TMP/$m.holdout.tsv"
        common=(--model "$model" --data "$TMP/$m" --threads 1 --seed 1 -q)
        # an epoch at rates 1e-12 exports every key's initial row and the
        # initial dense weights (what the run below starts from)
        "$HPS_BIN/hps-train" "${common[@]}" --lr 1e-12 --lr-sparse 1e-12 --export "$TMP/$m.init"
        "$HPS_BIN/hps-train" "${common[@]}" --epochs 3 --eval "$TMP/$m" --metrics "$TMP/$m.ndjson"
        replays+=("$model" "$TMP/$m.train.tsv" "$TMP/$m.holdout.tsv" "$TMP/$m.init" 3)
    done
    # one process replays every model (one import of torch): a JSON line each
    /usr/bin/python3 "$ROOT/tests/bench/bench_train_torch.py" --replay "${replays[@]}" > "$TMP/torch.json"
    run python3 - "$TMP" $models <<'PY'
import json, sys
torch = [json.loads(l) for l in open(f"{sys.argv[1]}/torch.json")]
assert len(torch) == len(sys.argv[2:]), torch
for m, t in zip(sys.argv[2:], torch):
    hps = [r["logloss"] for r in map(json.loads, open(f"{sys.argv[1]}/{m}.ndjson")) if r["event"] == "eval"]
    tl = [e["logloss"] for e in t["epochs"]]
    assert len(hps) == len(tl) == 3, (m, hps, tl)
    for e, (h, l) in enumerate(zip(hps, tl), 1):
        assert abs(h - l) <= 1e-4 * l, f"{m}: epoch {e}: hps {h:.6f}, torch {l:.6f}"
PY
    [ "$status" -eq 0 ] || { echo "$output"; false; }
}
