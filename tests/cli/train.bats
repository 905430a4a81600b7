#!/usr/bin/env bats
# hps-train from the command line: learning, checkpoints, export, checks.

load helpers

setup_file() {
    # one small Criteo-like data set for the file: 300k rows with a planted
    # model, small vocabularies (--scale) so one epoch can learn them
    export DATA=$BATS_FILE_TMPDIR/data
    mkdir -p "$DATA"
    "$HPS_BIN/hps-shard" synth 300000 --seed 3 --scale 0.001 --meta "$DATA/meta.json" \
        -o "$DATA/rows.tsv" 2>/dev/null
    "$HPS_BIN/hps-shard" -q -m "$TESTDATA/models/criteo-small.json" --holdout 0.1 -n 2 \
        -o "$DATA/shards" "$DATA/rows.tsv"
    head -n 20000 "$DATA/rows.tsv" > "$DATA/few.tsv"
    "$HPS_BIN/hps-shard" -q -m "$TESTDATA/models/criteo-small.json" -o "$DATA/few" "$DATA/few.tsv"
}

setup() {
    TMP=$(mktemp -d)
    MODEL=$TESTDATA/models/criteo-small.json
}

teardown() {
    rm -rf "$TMP"
}

@test "train: --help, --version, and every option documented" {
    run "$HPS_BIN/hps-train" --help
    [ "$status" -eq 0 ]
    [[ "$output" == *"usage: hps-train --plan PLAN --data SHARDS"* ]]
    run "$HPS_BIN/hps-train" --version
    [[ "$output" == "hps-train (hps) "* ]]
    check_options_documented hps-train
}

@test "train: one epoch on planted data ends within 0.01 AUC of the planted model" {
    "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/shards" --eval "$DATA/shards" \
        --threads 1 --metrics "$TMP/m.ndjson" -q
    planted=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["planted_auc"])' "$DATA/meta.json")
    auc=$(grep '"event":"eval"' "$TMP/m.ndjson" | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["auc"])')
    echo "# planted AUC $planted, trained AUC $auc" >&3
    python3 -c "import sys; sys.exit(0 if abs($auc - $planted) < 0.01 else 1)"
}

@test "train: metrics are NDJSON with start, step, eval and summary records" {
    "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --eval "$DATA/few" --threads 1 \
        --metrics "$TMP/m.ndjson" --metrics-interval 0 -q
    core=$("$HPS_BIN/hps-train" --version | sed -n 's/^blas: openblas //p')
    run python3 - "$TMP/m.ndjson" "$core" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
events = [r["event"] for r in recs]
assert events[0] == "start" and events[-1] == "summary" and "eval" in events, events
assert recs[0]["blas_core"] == sys.argv[2], (recs[0]["blas_core"], sys.argv[2])
steps = [r for r in recs if r["event"] == "step"]
assert steps and all(s["stages"][0]["measured_ms"] > 0 for s in steps[1:])
s = recs[-1]
assert s["samples"] == 20000 and s["steps"] == 79 and s["tables"][0]["rows"] > 0
PY
    [ "$status" -eq 0 ] || { echo "$output"; false; }
}

@test "train: a multi-class libsvm set learns; a logistic regression baseline beside it" {
    python3 "$BATS_TEST_DIRNAME/make_multiclass.py" 20000 5 1 > "$TMP/mc.svm"
    "$HPS_BIN/hps-shard" -q --format libsvm --classes 5 -m "$TESTDATA/models/libsvm-multiclass.json" \
        --holdout 0.2 -o "$TMP/mc" "$TMP/mc.svm"
    for m in libsvm-multiclass libsvm-logreg; do
        "$HPS_BIN/hps-train" --model "$TESTDATA/models/$m.json" --data "$TMP/mc" --eval "$TMP/mc" \
            --epochs 3 --lr 0.003 --threads 1 --metrics "$TMP/$m.ndjson" -q
        acc=$(json_field "$TMP/$m.ndjson" 'd["eval"]["accuracy"]')
        echo "# $m: accuracy $acc on 4000 held-out rows (chance 0.2)" >&3
        python3 -c "import sys; sys.exit(0 if $acc > 0.6 else 1)"
    done
}

@test "train: killed with SIGKILL and resumed, it ends with the same weights bit for bit" {
    args=(--model "$MODEL" --data "$DATA/few" --epochs 2 --threads 1)
    "$HPS_BIN/hps-train" "${args[@]}" -q --export "$TMP/straight.safetensors"
    run env HPS_TRAIN_KILL_AT_STEP=97 "$HPS_TEST_BIN/hps-train" "${args[@]}" -q \
        --checkpoint "$TMP/ckpt" --checkpoint-every 20
    [ "$status" -eq 137 ]   # killed by SIGKILL, mid-epoch 2
    [ "$(cat "$TMP/ckpt/latest")" = "ckpt-000000000080.hpsckpt" ]
    run "$HPS_BIN/hps-train" "${args[@]}" --checkpoint "$TMP/ckpt" --checkpoint-every 20 \
        --resume --export "$TMP/resumed.safetensors"
    [ "$status" -eq 0 ]
    [[ "$output" == *"resuming at step 80 (epoch 2, row 256)"* ]] || { echo "$output"; false; }
    cmp "$TMP/straight.safetensors" "$TMP/resumed.safetensors"
}

# the step records' losses of a metrics file, one a line
step_losses() {
    python3 -c 'import json, sys
print("\n".join(repr(r["loss"]) for r in map(json.loads, open(sys.argv[1])) if r["event"] == "step"))' "$1"
}

@test "train: --in-memory reads the rows first and trains bit for bit as the shards streamed, across shards, weighted keys and a resume" {
    "$HPS_BIN/hps-shard" -q -m "$MODEL" -n 2 -o "$TMP/two" "$DATA/few.tsv"   # a batch spans the two
    python3 "$BATS_TEST_DIRNAME/make_multiclass.py" 3000 5 1 > "$TMP/w.svm"
    "$HPS_BIN/hps-shard" -q --format libsvm --classes 5 -m "$TESTDATA/models/libsvm-logreg.json" -o "$TMP/w" "$TMP/w.svm"
    for set in "$MODEL:$TMP/two" "$TESTDATA/models/libsvm-logreg.json:$TMP/w"; do
        args=(--model "${set%%:*}" --data "${set#*:}" --epochs 3 --threads 1 --metrics-interval 0)
        "$HPS_BIN/hps-train" "${args[@]}" -q --metrics "$TMP/s.ndjson" --export "$TMP/s.safetensors"
        run "$HPS_BIN/hps-train" "${args[@]}" --in-memory 64 --metrics "$TMP/m.ndjson" --export "$TMP/m.safetensors"
        [ "$status" -eq 0 ]
        [[ "$output" == *"hps-train: --in-memory: "*" rows ("*" MiB) read into memory in "*" s"* ]]
        [ "$(step_losses "$TMP/m.ndjson" | wc -l)" -gt 100 ]
        diff <(step_losses "$TMP/s.ndjson") <(step_losses "$TMP/m.ndjson")
        cmp "$TMP/s.safetensors" "$TMP/m.safetensors"
    done
    # resumed inside epoch 2, it ends as the straight run
    args=(--model "$MODEL" --data "$TMP/two" --epochs 3 --threads 1 --in-memory 64)
    run env HPS_TRAIN_KILL_AT_STEP=97 "$HPS_TEST_BIN/hps-train" "${args[@]}" -q --checkpoint "$TMP/ckpt" \
        --checkpoint-every 20
    [ "$status" -eq 137 ]
    run "$HPS_BIN/hps-train" "${args[@]}" --checkpoint "$TMP/ckpt" --resume --export "$TMP/r.safetensors"
    [ "$status" -eq 0 ]
    [[ "$output" == *"resuming at step 80 (epoch 2, "* ]] || { echo "$output"; false; }
    "$HPS_BIN/hps-train" --model "$MODEL" --data "$TMP/two" --epochs 3 --threads 1 -q --export "$TMP/s.safetensors"
    cmp "$TMP/s.safetensors" "$TMP/r.safetensors"
}

@test "train: --in-memory below the rows' size streams them, says so, and trains as without it" {
    "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --epochs 2 --threads 1 -q --export "$TMP/s.safetensors"
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --epochs 2 --threads 1 --in-memory 1 \
        --export "$TMP/m.safetensors"
    [ "$status" -eq 0 ]
    [[ "$output" == *"hps-train: --in-memory: 20000 rows need more than 1 MiB: the training rows are decoded every epoch"* ]]
    cmp "$TMP/s.safetensors" "$TMP/m.safetensors"
    # the rows fit, their keys do not (20000 rows of 264 bytes: 5.0 MiB; 26 keys a row: 4.0 MiB more)
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --epochs 2 --threads 1 --in-memory 6 \
        --export "$TMP/k.safetensors"
    [ "$status" -eq 0 ]
    [[ "$output" == *"hps-train: --in-memory: 20000 rows and their keys need more than 6 MiB: the training rows are decoded every epoch"* ]]
    cmp "$TMP/s.safetensors" "$TMP/k.safetensors"
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --in-memory 0
    [ "$status" -eq 2 ]
    [[ "$output" == "hps-train: error: --in-memory: "* ]]
}

@test "train: a corrupted checkpoint is refused with a clear error" {
    "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --threads 1 -q --checkpoint "$TMP/ckpt"
    ckpt=$TMP/ckpt/$(cat "$TMP/ckpt/latest")
    printf '\xff' | dd of="$ckpt" bs=1 seek=200 conv=notrunc status=none
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --threads 1 -q \
        --checkpoint "$TMP/ckpt" --resume
    [ "$status" -eq 1 ]
    [ "$output" = "hps-train: error: $ckpt: checksum mismatch: the checkpoint is corrupted" ]
}

@test "train: the export loads with numpy (and PyTorch where installed) and holds the weights" {
    "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --threads 1 -q --export "$TMP/m.safetensors"
    run /usr/bin/python3 - "$TMP/m.safetensors" <<'PY'
import json, struct, sys
import numpy as np
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
data = raw[8 + n:]
def tensor(name):
    h = head[name]
    a, b = h["data_offsets"]
    return np.frombuffer(data[a:b], dtype={"F32": np.float32, "I64": np.int64}[h["dtype"]]).reshape(h["shape"])
assert head["__metadata__"]["model"] == "criteo-small"
w = tensor("fc1.weight")
assert w.shape == (64, 26 * 8 + 13) and np.isfinite(w).all() and w.std() > 0
assert tensor("out.bias").shape == (1,)
keys, rows = tensor("emb.C1.keys"), tensor("emb.C1.weight")
assert keys.shape[0] == rows.shape[0] > 0 and rows.shape[1] == 8
assert len(set(keys.tolist())) == len(keys)
try:
    import torch
except ImportError:
    print("torch: not installed, numpy only")
    sys.exit(0)
t = torch.frombuffer(bytearray(data[slice(*head["fc1.weight"]["data_offsets"])]), dtype=torch.float32)
assert torch.equal(t.reshape(64, -1), torch.from_numpy(w.copy()))
print("torch: fc1.weight equal")
PY
    [ "$status" -eq 0 ] || { echo "$output"; false; }
    echo "# $output" >&3
}

@test "train: the table memory cap stops with an error, or evicts with --evict" {
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --threads 1 -q --max-table-mb 1
    [ "$status" -eq 1 ]
    [[ "$output" == "hps-train: error: embedding layer 0: table full at "*" rows ("*" MiB); raise --max-table-mb or use --evict" ]]
    "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --threads 1 -q --max-table-mb 1 --evict \
        --metrics "$TMP/m.ndjson"
    run json_field "$TMP/m.ndjson" '(d["tables"][0]["evictions"] > 0, d["tables"][0]["mib"] <= 1.0)'
    [ "$output" = "(True, True)" ]
}

@test "train: a plan for another model, or shards of another schema, are refused" {
    "$HPS_BIN/hps-profile" --machine "$(machine_profile)" -m "$TESTDATA/models/tiny.json" --reps 1 --min-time 0 --warmup 0 --no-scaling > "$TMP/p.json"
    python3 - "$TMP/p.json" "$TMP/plan.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
plan = {"format": "hps-plan", "version": 1, "digests": {"model": p["model"]["digest"]},
        "model": {"batch": 8, "layers": 5},
        "stages": [{"index": 0, "type": "cpu", "kind": "cpu", "layers": [0, 4], "units": 1}]}
json.dump(plan, open(sys.argv[2], "w"))
PY
    run "$HPS_BIN/hps-train" --plan "$TMP/plan.json" --model "$MODEL" --data "$DATA/few"
    [ "$status" -eq 2 ]
    [[ "$output" == "hps-train: error: $TMP/plan.json: made for model sha256:"*"but $MODEL is sha256:"*"(re-run hps-plan)" ]]
    "$HPS_BIN/hps-shard" -q --format libsvm --classes 5 -o "$TMP/svm" "$TESTDATA/data/libsvm-multiclass.svm"
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$TMP/svm"
    [ "$status" -eq 2 ]
    [ "$output" = "hps-train: error: $TMP/svm: rows have 0 dense features, $MODEL expects 13" ]
}

@test "train: a plan moved with its inputs still finds them; a path that is no JSON leaks nothing" {
    mkdir -p "$TMP/a"
    cp "$MODEL" "$TMP/a/model.json"
    "$HPS_BIN/hps-profile" --machine "$(machine_profile)" -m "$TMP/a/model.json" --reps 1 --min-time 0 --warmup 0 --no-scaling \
        --estimate "$TESTDATA/devices/gpu-t4.json" -o "$TMP/a/p.json"
    "$HPS_BIN/hps-plan" -m "$TMP/a/model.json" -c "$TESTDATA/clusters/lab.json" -p "$TMP/a/p.json" \
        --min-throughput 10 --algo fixed:cpu -o "$TMP/a/plan.json"
    [ "$(json_field "$TMP/a/plan.json" 'd["inputs"]["model"]')" = "model.json" ]
    mv "$TMP/a" "$TMP/b"
    (cd / && "$HPS_BIN/hps-train" --plan "$TMP/b/plan.json" --data "$DATA/few" --threads 1 --steps 2 -q)
    # a plan naming a file that is no JSON: the error gives its position, never its bytes
    printf 'root:x:0:0:SECRET\n' > "$TMP/b/secret"
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["inputs"]["model"]=sys.argv[2]; json.dump(p,open(sys.argv[1],"w"))' \
        "$TMP/b/plan.json" "$TMP/b/secret"
    run "$HPS_BIN/hps-train" --plan "$TMP/b/plan.json" --data "$DATA/few"
    [ "$status" -eq 2 ]
    [ "$output" = "hps-train: error: $TMP/b/secret:1:4: invalid JSON: '[' or '{' expected" ]
}

@test "train: the plan's micro-batches (hps-plan --micro-batches) are the ones hps-train runs" {
    "$HPS_BIN/hps-profile" --machine "$(machine_profile)" -m "$MODEL" --reps 1 --min-time 0 --warmup 0 --no-scaling \
        --estimate "$TESTDATA/devices/gpu-t4.json" > "$TMP/p.json"
    "$HPS_BIN/hps-plan" -m "$MODEL" -c "$TESTDATA/clusters/lab.json" -p "$TMP/p.json" \
        --min-throughput 10 --algo fixed:cpu --micro-batches 3 -o "$TMP/plan.json"
    [ "$(json_field "$TMP/plan.json" 'd["pipeline"]')" = "{'micro_batches': 3, 'bubble': 1.0}" ]
    "$HPS_BIN/hps-train" --plan "$TMP/plan.json" --data "$DATA/few" --threads 1 --steps 1 -q \
        --metrics "$TMP/m.ndjson" --metrics-interval 0
    [ "$(head -n 1 "$TMP/m.ndjson" | json_field /dev/stdin 'd["micro_batches"]')" = 3 ]
    "$HPS_BIN/hps-train" --plan "$TMP/plan.json" --data "$DATA/few" --threads 1 --steps 1 -q \
        --metrics "$TMP/m2.ndjson" --metrics-interval 0 --micro-batches 2
    [ "$(head -n 1 "$TMP/m2.ndjson" | json_field /dev/stdin 'd["micro_batches"]')" = 2 ]
    run "$HPS_BIN/hps-plan" -m "$MODEL" -c "$TESTDATA/clusters/lab.json" -p "$TMP/p.json" \
        --min-throughput 10 --micro-batches 0
    [ "$status" -eq 2 ]
}

@test "train: a plan's GPU stage needs a device or --cpu-fallback" {
    "$HPS_BIN/hps-profile" --machine "$(machine_profile)" -m "$MODEL" --reps 1 --min-time 0 --warmup 0 --no-scaling \
        --estimate "$TESTDATA/devices/gpu-t4.json" > "$TMP/p.json"
    "$HPS_BIN/hps-plan" -m "$MODEL" -c "$TESTDATA/clusters/lab.json" -p "$TMP/p.json" \
        --min-throughput 20000 --algo exact -o "$TMP/plan.json"
    run "$HPS_BIN/hps-train" --plan "$TMP/plan.json" --data "$DATA/few" --threads 1
    [ "$status" -eq 1 ]
    [[ "$output" == *"stage 0 runs on 'gpu-t4', a GPU type"*"pass --cpu-fallback"* ]]
    run "$HPS_BIN/hps-train" --plan "$TMP/plan.json" --data "$DATA/few" --threads 1 --cpu-fallback -q
    [ "$status" -eq 0 ]
}

@test "train: --probe prints a profile that hps-profile and hps-plan accept" {
    "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --threads 2 --probe 3 -o "$TMP/probe.json"
    run json_field "$TMP/probe.json" '(d["devices"][0]["id"], d["devices"][0]["probe"], d["devices"][0]["layers"][2]["scaling"]["units"])'
    [ "$output" = "('cpu:2', True, [1, 2])" ]
    # the step's exchange with a server, as hps-profile --data measures it (it had none)
    run json_field "$TMP/probe.json" 'sorted(d["devices"][0]["exchange"])'
    [ "$output" = "['bytes', 'rows', 'server_ms', 'worker_ms']" ]
    [ "$(json_field "$TMP/probe.json" 'd["devices"][0]["exchange"]["rows"] > 0')" = True ]
    "$HPS_BIN/hps-profile" --merge "$TMP/probe.json" --format table > /dev/null
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["devices"][0]["id"]="cpu"; json.dump(p,open(sys.argv[1],"w"))' "$TMP/probe.json"
    "$HPS_BIN/hps-plan" -m "$MODEL" -c "$TESTDATA/clusters/lab.json" -p "$TMP/probe.json" \
        -p <("$HPS_BIN/hps-profile" --machine "$(machine_profile)" -m "$MODEL" --reps 1 --min-time 0 --warmup 0 --no-scaling -D cpu:1 \
             --estimate "$TESTDATA/devices/gpu-t4.json" | python3 -c 'import json,sys; p=json.load(sys.stdin); p["devices"]=p["devices"][1:]; json.dump(p,sys.stdout)') \
        --min-throughput 1000 --algo exact -f table > /dev/null
}

@test "train: usage errors" {
    run "$HPS_BIN/hps-train" --data x
    [ "$status" -eq 2 ]
    [[ "$output" == "hps-train: error: --plan or --model is required"* ]]
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --resume
    [ "$status" -eq 2 ]
    [[ "$output" == "hps-train: error: --resume needs --checkpoint DIR"* ]]
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --optimizer rmsprop
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "hps-train: error: --optimizer: 'rmsprop' is not one of adam, sgd" ]
    [ "${lines[1]}" = "try 'hps-train --help'" ]
}

@test "train: --eval with --steps evaluates at the end; no plan is \"plan\": null" {
    "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/shards" --eval "$DATA/shards" --steps 20 \
        --threads 1 -q --metrics "$TMP/m.ndjson"
    python3 - "$TMP/m.ndjson" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert recs[0]["event"] == "start" and recs[0]["plan"] is None, recs[0]
evals = [r for r in recs if r["event"] == "eval"]
assert len(evals) == 1 and evals[0]["step"] == 20 and evals[0]["rows"] > 0, evals
assert "eval" in recs[-1], recs[-1]
PY
}

@test "train: the last step record of a 1-epoch run names epoch 1 and counts training alone" {
    "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --eval "$DATA/shards" --threads 1 -q \
        --metrics "$TMP/m.ndjson"
    python3 - "$TMP/m.ndjson" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in recs if r["event"] == "step"]
summary = recs[-1]
assert summary["event"] == "summary"
last = steps[-1]
assert last["epoch"] == 1, last
# the last step record covers training alone: it was written before the
# evaluation after the epoch, so its clock stops short of the summary's
# training time (the run's seconds less the evaluation's)
assert last["step"] == summary["steps"], (last, summary)
assert last["elapsed_s"] <= summary["seconds"] - summary["eval_seconds"] + 1e-3, (last, summary)
PY
}

@test "train: the summary sets the plan's predicted samples/s and stage ms beside the measured ones" {
    "$HPS_BIN/hps-profile" --machine "$(machine_profile)" -m "$MODEL" --reps 1 --min-time 0 --warmup 0 --no-scaling > "$TMP/p.json"
    python3 - "$TMP/p.json" "$TMP/plan.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
plan = {"format": "hps-plan", "version": 1, "digests": {"model": p["model"]["digest"]},
        "model": {"batch": p["model"]["batch"], "layers": len(p["devices"][0]["layers"])},
        "stages": [{"index": 0, "type": "cpu", "kind": "cpu", "layers": [0, 1], "units": 1, "ms_per_batch": 2.5},
                   {"index": 1, "type": "cpu", "kind": "cpu", "layers": [2, len(p["devices"][0]["layers"]) - 1],
                    "units": 1, "ms_per_batch": 4}],
        "predicted": {"throughput": 123456}}
json.dump(plan, open(sys.argv[2], "w"))
PY
    run "$HPS_BIN/hps-train" --plan "$TMP/plan.json" --model "$MODEL" --data "$DATA/few" --threads 1 --steps 6 \
        --micro-batches 2 --metrics "$TMP/m.ndjson"
    [ "$status" -eq 0 ]
    [[ "$output" == *"hps-train: predicted 123456 samples/s for one process, measured "*"%)"* ]]
    [[ "$output" == *"hps-train:   stage 1: "*" ms per batch computing, predicted 4.000 ("*"%)"* ]]
    python3 - "$TMP/m.ndjson" <<'PY'
import json, sys
s = [json.loads(l) for l in open(sys.argv[1])][-1]
assert s["event"] == "summary" and s["predicted_samples_per_s"] == 123456, s
assert s["predicted_for"] == "one process", s
assert abs(s["error"] - (s["samples_per_s"] / 123456 - 1)) < 1e-6, s
assert [st["predicted_ms"] for st in s["stages"]] == [2.5, 4], s
for st in s["stages"]:
    assert st["measured_ms"] > 0 and abs(st["error"] - (st["measured_ms"] / st["predicted_ms"] - 1)) < 1e-6, st
# computing of one stage fits in the time of the steps
train_ms = (s["seconds"] - s["eval_seconds"]) * 1e3 / s["steps"]
assert all(st["measured_ms"] <= train_ms for st in s["stages"]), (s, train_ms)
PY
    # a plan priced with its exchanges with the servers: one process, whose
    # tables are its own, is compared with the plan's figures without them
    python3 - "$TMP/plan.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
plan["stages"][0]["servers_ms"] = 1.5
plan["predicted"]["in_process_throughput"] = 200000
json.dump(plan, open(sys.argv[1], "w"))
PY
    run "$HPS_BIN/hps-train" --plan "$TMP/plan.json" --model "$MODEL" --data "$DATA/few" --threads 1 --steps 2 \
        --micro-batches 2 --metrics "$TMP/x.ndjson"
    [ "$status" -eq 0 ]
    [[ "$output" == *"hps-train: predicted 200000 samples/s for one process, measured "* ]]
    [[ "$output" == *"hps-train:   stage 0: "*" ms per batch computing, predicted 1.000 ("* ]]
    [ "$(json_field "$TMP/x.ndjson" '(d["predicted_samples_per_s"], d["predicted_for"], [s["predicted_ms"] for s in d["stages"]])')" = "(200000.0, 'one process', [1.0, 4.0])" ]
    # a plan that says what its layers compute: each stage is compared with that
    python3 -c 'import json, sys; p = json.load(open(sys.argv[1]))
for s, ms in zip(p["stages"], (0.75, 3.25)): s["layers_ms"] = ms
json.dump(p, open(sys.argv[1], "w"))' "$TMP/plan.json"
    run "$HPS_BIN/hps-train" --plan "$TMP/plan.json" --model "$MODEL" --data "$DATA/few" --threads 1 --steps 2 \
        --micro-batches 2 --metrics "$TMP/l.ndjson"
    [ "$status" -eq 0 ]
    [[ "$output" == *"hps-train:   stage 1: "*" ms per batch computing, predicted 3.250 ("* ]]
    [ "$(json_field "$TMP/l.ndjson" '[s["predicted_ms"] for s in d["stages"]]')" = "[0.75, 3.25]" ]
    # no plan: nothing predicted, the stage still measured
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --threads 1 --steps 2 --metrics "$TMP/n.ndjson"
    [[ "$output" == *"hps-train:   stage 0: "*" ms per batch computing (no prediction)"* ]]
    [ "$(json_field "$TMP/n.ndjson" '(d["predicted_samples_per_s"], d["error"], d["stages"][0]["predicted_ms"])')" = "(None, None, None)" ]
}

@test "train: the summary splits a step into reading the batch, the engine and the stages" {
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --threads 1 --steps 6 --metrics "$TMP/m.ndjson"
    [ "$status" -eq 0 ]
    [[ "$output" == *"hps-train:   a step: "*" ms, of which "*" reading the batch and "*" in the engine around the stages"* ]]
    python3 - "$TMP/m.ndjson" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
B, s = recs[0]["batch"], recs[-1]
assert abs(s["step_ms"] - B * 1e3 / s["samples_per_s"]) < 1e-6 * s["step_ms"], s
assert s["read_ms"] > 0 and s["engine_ms"] > 0, s
# disjoint parts of the same steps: together they fit in a step
assert s["read_ms"] + s["engine_ms"] + s["stages"][0]["measured_ms"] <= s["step_ms"] * (1 + 1e-6), s
PY
}

@test "train: show draws the metrics as training curves that render" {
    "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --eval "$DATA/shards" --epochs 2 --threads 1 -q \
        --metrics-interval 0 --metrics "$TMP/m.ndjson"
    "$HPS_BIN/hps-train" show "$TMP/m.ndjson" -o "$TMP/curves.svg"
    for title in "training loss" "evaluation" "samples/s per stage" "ms per batch"; do
        grep -q ">$title" "$TMP/curves.svg"
    done
    rsvg-convert "$TMP/curves.svg" -o "$TMP/curves.png"
    [ "$(head -c 4 "$TMP/curves.png" | od -An -c | tr -d ' ')" = "211PNG" ]
    echo 'not json' > "$TMP/bad.ndjson"
    run "$HPS_BIN/hps-train" show "$TMP/bad.ndjson"
    [ "$status" -eq 2 ]
    [ "$output" = "hps-train: error: $TMP/bad.ndjson:1: expected a metrics record (a JSON object with \"event\")" ]
}

@test "train: a short run records a curve by default, and one record draws inside its charts" {
    # no --metrics-interval: records every 1/100 of the run's steps, not one per 10 s
    "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --threads 1 -q --metrics "$TMP/m.ndjson"
    steps=$(json_field "$TMP/m.ndjson" "d['steps']")
    records=$(grep -c '"event": *"step"' "$TMP/m.ndjson")
    [ "$steps" -ge 3 ]
    [ "$records" -ge "$steps" ] || { echo "$records step records for $steps steps"; false; }
    # one step, one record: every dot inside a chart's frame
    "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --threads 1 -q --steps 1 --metrics "$TMP/one.ndjson"
    "$HPS_BIN/hps-train" show "$TMP/one.ndjson" -o "$TMP/one.svg"
    python3 - "$TMP/one.svg" <<'PY'
import re, sys
svg = open(sys.argv[1]).read()
frames = [tuple(float(v) for v in m) for m in
          re.findall(r'<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)" fill="none"', svg)]
dots = [(float(x), float(y)) for x, y in re.findall(r'<circle cx="([-\d.]+)" cy="([-\d.]+)"', svg)]
assert len(frames) == 4 and dots, (frames, dots)
out = [d for d in dots if not any(x <= d[0] <= x + w and y <= d[1] <= y + h for x, y, w, h in frames)]
assert not out, "dots outside every chart: %s" % out
PY
}

@test "train: more than 256 micro-batches (was a stack overflow)" {
    python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); m["batch"]=600; json.dump(m,open(sys.argv[2],"w"))' \
        "$MODEL" "$TMP/m600.json"
    run "$HPS_BIN/hps-train" --model "$TMP/m600.json" --data "$DATA/few" --threads 1 -q --steps 2 \
        --micro-batches 600
    [ "$status" -eq 0 ] || { echo "$output"; false; }
}

@test "train: a one-shard set is opened once in a run of 3 epochs: its reader is rewound at each wrap" {
    # closed and reopened, the reader made every epoch wait for its first block
    "$HPS_BIN/hps-shard" -q -m "$MODEL" -n 1 -o "$TMP/one" "$DATA/few.tsv"
    # (LeakSanitizer, in make asan, does not run under ptrace)
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        strace -f -e trace=openat -o "$TMP/trace" "$HPS_BIN/hps-train" --model "$MODEL" --data "$TMP/one" \
        --epochs 3 --threads 1 --metrics "$TMP/m.ndjson" -q
    [ "$(grep -c 'shard-00000.hps"' "$TMP/trace")" -eq 1 ]
    python3 - "$TMP/m.ndjson" <<'PY'
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if '"summary"' in l][-1]
assert s["epochs"] == 3 and s["samples"] == 3 * 20000, s
PY
}

@test "train: a missing shard is an error, not a short epoch" {
    "$HPS_BIN/hps-shard" -q -m "$MODEL" -n 3 -o "$TMP/three" "$DATA/few.tsv"
    rm "$TMP/three/shard-00001.hps"
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$TMP/three" --threads 1 -q
    [ "$status" -ne 0 ]
    [[ "$output" == "hps-train: error: "*"shard-00001.hps"* ]] || { echo "$output"; false; }
}

@test "train: evaluation adds no table rows, so it works under a tight cap" {
    "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --threads 1 -q --metrics "$TMP/a.ndjson"
    "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --eval "$DATA/shards" --threads 1 -q \
        --metrics "$TMP/b.ndjson"
    [ "$(json_field "$TMP/a.ndjson" 'd["tables"][0]["rows"]')" = "$(json_field "$TMP/b.ndjson" 'd["tables"][0]["rows"]')" ]
    "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --eval "$DATA/shards" --threads 1 -q \
        --max-table-mb 1 --evict
}

@test "train: a fresh run refuses a directory of another run's checkpoints" {
    "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --threads 1 -q --steps 10 \
        --checkpoint "$TMP/ck" --checkpoint-every 5
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --threads 1 -q --steps 3 \
        --checkpoint "$TMP/ck"
    [ "$status" -eq 2 ]
    [ "$output" = "hps-train: error: $TMP/ck: holds checkpoints of an earlier run: pass --resume to continue it, or use another directory" ]
    [ -e "$TMP/ck/$(cat "$TMP/ck/latest")" ]
}

@test "train: resuming a run that reached --steps trains no further" {
    "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --threads 1 -q --steps 5 --checkpoint "$TMP/ck"
    "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --threads 1 -q --steps 5 --checkpoint "$TMP/ck" \
        --resume --metrics "$TMP/m.ndjson"
    [ "$(json_field "$TMP/m.ndjson" 'd["steps"]')" = 5 ]
    [ "$(cat "$TMP/ck/latest")" = "ckpt-000000000005.hpsckpt" ]
}

# Day-by-day continuation is allowed, but never silent (hps-train(1), Checkpoints).
@test "train: resuming on other data of the same schema says so, naming both manifests" {
    "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/few" --threads 1 -q --steps 5 --checkpoint "$TMP/ck"
    few=sha256:$(sha256sum < "$DATA/few/manifest.json" | cut -c1-64)
    other=sha256:$(sha256sum < "$DATA/shards/manifest.json" | cut -c1-64)
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/shards" --threads 1 --steps 8 \
        --checkpoint "$TMP/ck" --resume
    [ "$status" -eq 0 ]
    [[ "$output" == *"hps-train: warning: $TMP/ck/ckpt-000000000005.hpsckpt: made on other data (manifest.json ${few:0:19}...), resuming on manifest.json ${other:0:19}...: the tables and optimizer state carry over"* ]]
    # the same data again: no word
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DATA/shards" --threads 1 --steps 10 \
        --checkpoint "$TMP/ck" --resume
    [ "$status" -eq 0 ]
    [[ "$output" != *"other data"* ]]
}

@test "train: the progress bar on a terminal follows --steps and shows an ETA" {
    run on_terminal "$HPS_BIN/hps-train --model $MODEL --data $DATA/few --steps 5 --threads 1"
    [ "$status" -eq 0 ] || { echo "$output"; false; }
    [[ "$output" == *"100% epoch 1/1 step 5/5 loss "*" ETA 00:00"* ]]
}
