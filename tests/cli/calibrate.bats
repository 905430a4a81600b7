#!/usr/bin/env bats
# hps-plan --calibrate: a run's measured figures folded into the profile make
# the re-plan predict that run; and what it refuses.

load helpers

setup_file() {
    export DATA=$BATS_FILE_TMPDIR/data
    mkdir -p "$DATA"
    "$HPS_BIN/hps-shard" synth 20000 --seed 3 --scale 0.001 -o "$DATA/rows.tsv" 2>/dev/null
    "$HPS_BIN/hps-shard" -q -m "$TESTDATA/models/criteo-small.json" -o "$DATA/shards" "$DATA/rows.tsv"
    # one profile a file, each test's copy in setup (make check's budget: a profile a test)
    "$HPS_BIN/hps-profile" --machine "$(machine_profile)" -m "$TESTDATA/models/criteo-small.json" -D cpu:1 --reps 2 --min-time 0 --warmup 1 -q \
        -o "$DATA/p.json"
}

setup() {
    TMP=$(mktemp -d)
    MODEL=$TESTDATA/models/criteo-small.json
    # this machine as one CPU type on one thread: a unit for the worker, one for its server
    cat > "$TMP/here.json" <<'JSON'
{"format": "hps-cluster", "version": 1, "name": "here",
 "resources": [{"name": "cpu", "kind": "cpu", "device": "cpu:1", "threads": 1, "price_per_hour": 1,
                "max_units": 2, "nic_gbps": 100, "mem_gib": 4}],
 "servers": {"gbps": 100}}
JSON
    cp "$DATA/p.json" "$TMP/p.json"
}

teardown() {
    rm -rf "$TMP"
}

@test "calibrate: the re-plan from the calibrated profile predicts the run it came from, to 0.1%" {
    "$HPS_BIN/hps-plan" -q -m "$MODEL" -c "$TMP/here.json" -p "$TMP/p.json" -t 1 -a exact -o "$TMP/plan.json"
    "$HPS_BIN/hps-train" -q --plan "$TMP/plan.json" --data "$DATA/shards" --threads 1 --steps 8 \
        --metrics "$TMP/run.ndjson"
    run "$HPS_BIN/hps-plan" --calibrate "$TMP/run.ndjson" -m "$MODEL" -c "$TMP/here.json" -p "$TMP/p.json" \
        -o "$TMP/cal.json"
    [ "$status" -eq 0 ]
    [[ "$output" == *"hps-plan: stage 0 (layers 0-"*" on 'cpu', 1 unit, rows servers): model "*" ms, run "*" ms ("*" computing): device 'cpu:1' layers x"* ]]
    "$HPS_BIN/hps-plan" -q -m "$MODEL" -c "$TMP/here.json" -p "$TMP/cal.json" -t 1 -a exact -o "$TMP/plan2.json"
    python3 - "$TMP/run.ndjson" "$TMP/plan2.json" "$TMP/cal.json" <<'PY'
import json, sys
run = [json.loads(l) for l in open(sys.argv[1])][-1]
plan = json.load(open(sys.argv[2]))
cal = json.load(open(sys.argv[3]))
# a run in one process: the plan's prediction for that, without the exchange with servers
pred = plan["predicted"]["in_process_throughput"]
assert abs(pred / run["samples_per_s"] - 1) <= 1e-3, (pred, run["samples_per_s"])
# one stage: its time is the whole step the run measured
step_ms = 1000 * plan["model"]["batch"] / run["samples_per_s"]
st = plan["stages"][0]
assert abs((st["ms_per_batch"] - st["servers_ms"]) / step_ms - 1) <= 1e-3, (st, step_ms)
layers = cal["devices"][0]["layers"]
f = layers[0]["calibrated"]["factor"]
assert all(l["calibrated"]["factor"] == f and l["calibrated"]["run"] == sys.argv[1] for l in layers), layers
PY
    # the calibrated profile is a profile: hps-profile reads it
    "$HPS_BIN/hps-profile" show "$TMP/cal.json" -f table > /dev/null
}

@test "calibrate: refuses a run of another model, an unfinished run, a type the cluster lacks" {
    printf '{"event":"start","model":"tiny","batch":8,"micro_batches":1,"stages":[{"index":0,"type":"cpu","layers":[0,4],"units":1}]}\n' \
        > "$TMP/other.ndjson"
    printf '{"event":"summary","steps":3,"samples_per_s":100,"stages":[{"index":0,"measured_ms":1}]}\n' >> "$TMP/other.ndjson"
    run "$HPS_BIN/hps-plan" --calibrate "$TMP/other.ndjson" -m "$MODEL" -c "$TMP/here.json" -p "$TMP/p.json"
    [ "$status" -eq 2 ]
    [ "$output" = "hps-plan: error: $TMP/other.ndjson: a run of model 'tiny', not $MODEL's 'criteo-small'" ]
    head -n 1 "$TMP/other.ndjson" > "$TMP/cut.ndjson"
    run "$HPS_BIN/hps-plan" --calibrate "$TMP/cut.ndjson" -m "$MODEL" -c "$TMP/here.json" -p "$TMP/p.json"
    [ "$status" -eq 2 ]
    [ "$output" = "hps-plan: error: $TMP/cut.ndjson: no summary record: the run did not finish" ]
    batch=$(json_field "$TMP/p.json" 'd["model"]["batch"]')
    layers=$(json_field "$TMP/p.json" 'd["model"]["layers"] - 1')
    printf '{"event":"start","model":"criteo-small","batch":%s,"micro_batches":1,"stages":[{"index":0,"type":"gpu","layers":[0,%s],"units":1}]}\n' \
        "$batch" "$layers" > "$TMP/gpu.ndjson"
    printf '{"event":"summary","steps":3,"samples_per_s":100,"stages":[{"index":0,"measured_ms":1}]}\n' >> "$TMP/gpu.ndjson"
    run "$HPS_BIN/hps-plan" --calibrate "$TMP/gpu.ndjson" -m "$MODEL" -c "$TMP/here.json" -p "$TMP/p.json"
    [ "$status" -eq 2 ]
    [ "$output" = "hps-plan: error: $TMP/gpu.ndjson: stage 0 ran on type 'gpu', which $TMP/here.json lacks" ]
    printf 'not json\n' > "$TMP/bad.ndjson"
    run "$HPS_BIN/hps-plan" --calibrate "$TMP/bad.ndjson" -m "$MODEL" -c "$TMP/here.json" -p "$TMP/p.json"
    [ "$status" -eq 2 ]
    [ "$output" = "hps-plan: error: $TMP/bad.ndjson:1: expected a metrics record (a JSON object with \"event\")" ]
    run "$HPS_BIN/hps-plan" --calibrate "$TMP/gpu.ndjson" -m "$MODEL" -c "$TMP/here.json" < "$TMP/p.json"
    [ "$status" -eq 2 ]
    [[ "$output" == "hps-plan: error: --calibrate needs the profiles as files: -p PROFILE"* ]]
}

# A forged layer index of 2^31 - 1 overflowed an int (UBSan in
# train_metrics_read.c); names from the run reached the terminal raw.
@test "calibrate: refuses layer indices and ranks out of range; names from the run are echoed on one line" {
    layers=$(json_field "$TMP/p.json" 'd["model"]["layers"] - 1')
    batch=$(json_field "$TMP/p.json" 'd["model"]["batch"]')
    summary='{"event":"summary","steps":3,"samples_per_s":100,"stages":[{"index":0,"measured_ms":1}]}'
    for last in 2147483647 -1 4294967296 1024; do
        printf '{"event":"start","model":"criteo-small","batch":%s,"micro_batches":1,"stages":[{"index":0,"type":"cpu","layers":[0,%s],"units":1}]}\n%s\n' \
            "$batch" "$last" "$summary" > "$TMP/forged.ndjson"
        run "$HPS_BIN/hps-plan" --calibrate "$TMP/forged.ndjson" -m "$MODEL" -c "$TMP/here.json" -p "$TMP/p.json"
        [ "$status" -eq 2 ]
        [ "$output" = "hps-plan: error: $TMP/forged.ndjson:1: start: stage 0: layers must be [first, last], layer indices from 0 to 1023" ]
    done
    printf '{"event":"start","model":"criteo-small","batch":%s,"micro_batches":1,"stages":[{"index":0,"type":"cpu","layers":[0,%s],"units":1}]}\n{"event":"dist","ranks":-2147483649}\n%s\n' \
        "$batch" "$layers" "$summary" > "$TMP/ranks.ndjson"
    run "$HPS_BIN/hps-plan" --calibrate "$TMP/ranks.ndjson" -m "$MODEL" -c "$TMP/here.json" -p "$TMP/p.json"
    [ "$status" -eq 2 ]
    [ "$output" = "hps-plan: error: $TMP/ranks.ndjson:2: dist: ranks=-2147483649 must be in [1, 2147483647]" ]
    printf '{"event":"start","model":"criteo-small","batch":%s,"micro_batches":1,"stages":[{"index":0,"type":"cpu","layers":[0,%s],"units":1}]}\n{"event":"summary","steps":3,"samples_per_s":1e-300,"stages":[{"index":0,"measured_ms":1}]}\n' \
        "$batch" "$layers" > "$TMP/slow.ndjson"
    run "$HPS_BIN/hps-plan" --calibrate "$TMP/slow.ndjson" -m "$MODEL" -c "$TMP/here.json" -p "$TMP/p.json"
    [ "$status" -eq 2 ]
    [ "$output" = "hps-plan: error: $TMP/slow.ndjson: summary: samples_per_s=1e-300 at batch $batch: a step of more than 1e12 ms" ]
    printf '{"event":"start","model":"x\\n\\u001b[31mhps-plan: error: forged","batch":%s,"micro_batches":1,"stages":[{"index":0,"type":"cpu","layers":[0,%s],"units":1}]}\n%s\n' \
        "$batch" "$layers" "$summary" > "$TMP/model.ndjson"
    run "$HPS_BIN/hps-plan" --calibrate "$TMP/model.ndjson" -m "$MODEL" -c "$TMP/here.json" -p "$TMP/p.json"
    [ "$status" -eq 2 ]
    [ "$output" = "hps-plan: error: $TMP/model.ndjson: a run of model 'x??[31mhps-plan: error: forged', not $MODEL's 'criteo-small'" ]
    printf '{"event":"start","model":"criteo-small","batch":%s,"micro_batches":1,"stages":[{"index":0,"type":"g\\u001b]0;pwned\\u0007pu\\r","layers":[0,%s],"units":1}]}\n%s\n' \
        "$batch" "$layers" "$summary" > "$TMP/type.ndjson"
    run "$HPS_BIN/hps-plan" --calibrate "$TMP/type.ndjson" -m "$MODEL" -c "$TMP/here.json" -p "$TMP/p.json"
    [ "$status" -eq 2 ]
    [ "$output" = "hps-plan: error: $TMP/type.ndjson: stage 0 ran on type 'g?]0;pwned?pu?', which $TMP/here.json lacks" ]
}

# The run's summary says where each stage kept its rows; --calibrate prices
# the stage so: here a cache of 10% of the rows a run creates, at the hit
# rate the run measured, not the hbm the planner chose for a T4.
@test "calibrate: a run with rows: cache is priced as a cache at its measured hit rate, and says so" {
    "$HPS_BIN/hps-profile" --machine "$(machine_profile)" -m "$MODEL" --reps 1 --warmup 0 --no-scaling \
        --estimate "$TESTDATA/devices/gpu-t4.json" > "$TMP/t4.json" 2>/dev/null
    "$HPS_BIN/hps-plan" -q -m "$MODEL" -c "$TESTDATA/clusters/lab.json" -p "$TMP/t4.json" \
        --min-throughput 20000 --algo exact -o "$TMP/hbm.json"
    python3 - "$TMP/hbm.json" "$TMP/cache.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
assert [st["rows"] for st in p["stages"]] == ["hbm"], p["stages"]
for st in p["stages"]:
    st["rows"], st["executed_as"], st["cache_rows"] = "cache", "cache", 300
json.dump(p, open(sys.argv[2], "w"))
PY
    "$HPS_BIN/hps-train" -q --plan "$TMP/cache.json" --data "$DATA/shards" --threads 1 --cpu-fallback --steps 8 \
        --metrics "$TMP/run.ndjson"
    # the summary's stage: where its rows were, the cache's rows and its hit rate (that of the rows record)
    read -r rows cap hit want < <(python3 -c 'import json,sys
s = json.loads(open(sys.argv[1]).readlines()[-1]); st = s["stages"][0]
assert st["shards"] == 0 and st["servers"] is None, st
print(st["rows"], st["cache_rows"], st["hit_rate"], s["rows"][0]["hit_rate"])' "$TMP/run.ndjson")
    [ "$rows" = cache ] && [ "$cap" = 300 ] && [ "$hit" = "$want" ]
    calibrate() {
        "$HPS_BIN/hps-plan" --calibrate "$1" -m "$MODEL" -c "$TESTDATA/clusters/lab.json" -p "$TMP/t4.json" \
            -o "$TMP/cal.json" 2>&1 | grep '^hps-plan: stage 0 '
    }
    line=$(calibrate "$TMP/run.ndjson")
    shown=$(printf '%.4f' "$hit")
    [[ "$line" == *", 1 unit, rows cache of 300 at the run's hit rate $shown): model "* ]] || { echo "$line"; false; }
    # the same run without the rows fields (an hps-train before them): the
    # planner's rows (hbm), another price, and a note that says so
    python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    for st in r.get("stages", []) if r["event"] == "summary" else []:
        for k in ("rows", "cache_rows", "hit_rate", "shards", "servers"): del st[k]
    print(json.dumps(r))' "$TMP/run.ndjson" > "$TMP/old.ndjson"
    run "$HPS_BIN/hps-plan" --calibrate "$TMP/old.ndjson" -m "$MODEL" -c "$TESTDATA/clusters/lab.json" \
        -p "$TMP/t4.json" -o "$TMP/cal-old.json"
    [ "$status" -eq 0 ]
    [[ "$output" == *"hps-plan: $TMP/old.ndjson: its summary does not say where the stages kept their rows (an hps-train before it): each stage priced with its rows where the planner would keep them"* ]]
    old=$(grep '^hps-plan: stage 0 ' <<< "$output")
    [[ "$old" == *", 1 unit, rows hbm (the planner's; the run does not say)): model "* ]] || { echo "$old"; false; }
    model_ms() { sed 's/.*: model \([0-9.]*\) ms.*/\1/' <<< "$1"; }
    [ "$(model_ms "$line")" != "$(model_ms "$old")" ]
    # a malformed rows field: one line naming the file, the record, the stage and the field
    sed 's/"rows":"cache","cache_rows":300/"rows":"disk","cache_rows":300/' "$TMP/run.ndjson" > "$TMP/bad.ndjson"
    run "$HPS_BIN/hps-plan" --calibrate "$TMP/bad.ndjson" -m "$MODEL" -c "$TESTDATA/clusters/lab.json" -p "$TMP/t4.json"
    [ "$status" -eq 2 ]
    [[ "$output" =~ ^"hps-plan: error: $TMP/bad.ndjson:"[0-9]+": summary: stage 0: rows 'disk' must be one of none|servers|hbm|cache"$ ]] || { echo "$output"; false; }
}
