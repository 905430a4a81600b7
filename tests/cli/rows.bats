#!/usr/bin/env bats
# hps-train runs every `rows` value the planner chooses (hps-train(1) ROWS):
# servers (host tables), hbm (the stage's rows in its backend's memory) and
# cache (C hot rows there, in front of the host tables).  Without a GPU the
# GPU stages run on the CPU backend (--cpu-fallback), whose device rows are
# a heap of their own reached through the same copies as a GPU's.

load helpers
load dist_helpers

# The host's work for device rows is measured (a profile's device_rows_ms,
# here one cold probe): a busy moment made it large enough that the planner
# chose servers.  The tests below run the planner's device-rows plans, so
# its choice must not hang on this machine's load: pin_rows_ms FILE MS
# fixes it at about what a quiet machine measures.
pin_rows_ms() {
    python3 -c 'import json,sys; p = json.load(open(sys.argv[1]))
for d in p["devices"]:
    if "device_rows_ms" in d: d["device_rows_ms"] = float(sys.argv[2])
json.dump(p, open(sys.argv[1], "w"))' "$1" "$2"
}

setup_file() {
    export DATA=$BATS_FILE_TMPDIR/data
    mkdir -p "$DATA"
    local model=$TESTDATA/models/criteo-small.json
    "$HPS_BIN/hps-shard" synth 20000 --seed 3 --scale 0.001 -o "$DATA/rows.tsv" 2>/dev/null
    "$HPS_BIN/hps-shard" -q -m "$model" -o "$DATA/few" "$DATA/rows.tsv"
    "$HPS_BIN/hps-shard" cat "$DATA/few" > "$DATA/few.tsv"
    # a T4 keeps every row of the small model: the planner says rows: hbm
    "$HPS_BIN/hps-profile" --machine "$(machine_profile)" -m "$model" --reps 1 --warmup 0 --no-scaling \
        --estimate "$TESTDATA/devices/gpu-t4.json" > "$DATA/p.json" 2>/dev/null
    pin_rows_ms "$DATA/p.json" 0.2
    "$HPS_BIN/hps-plan" -m "$model" -c "$TESTDATA/clusters/lab.json" -p "$DATA/p.json" \
        --min-throughput 20000 --algo exact -o "$DATA/hbm.json"
    "$HPS_BIN/hps-plan" -m "$model" -c "$TESTDATA/clusters/lab.json" -p "$DATA/p.json" \
        --min-throughput 20000 --algo exact --rows servers -o "$DATA/servers.json"
    # the rows a run creates, and a cache of 10% of them
    "$HPS_BIN/hps-train" --plan "$DATA/servers.json" --data "$DATA/few" --threads 1 --cpu-fallback \
        -q --metrics "$DATA/servers.ndjson" --micro-batches 3 --export "$DATA/servers.safetensors"
    python3 - "$DATA" <<'PY'
import json, sys
d = sys.argv[1]
rows = json.loads(open(d + "/servers.ndjson").readlines()[-1])["tables"][0]["rows"]
p = json.load(open(d + "/hbm.json"))
for st in p["stages"]:
    st["rows"], st["executed_as"], st["cache_rows"] = "cache", "cache", rows // 10
json.dump(p, open(d + "/cache.json", "w"))
open(d + "/capacity", "w").write(str(rows // 10))
PY
}

setup() {
    # beside $DATA, at its depth: a plan names its model relative to its own
    # directory (hps-plan(5)), and the tests write edited copies of $DATA's
    # plans here
    TMP=$(mktemp -d "$BATS_FILE_TMPDIR/tmp.XXXXXX")
    MODEL=$TESTDATA/models/criteo-small.json
}

teardown() {
    rm -rf "$TMP"
}

# step losses of a metrics file, one a line, as printed
losses() {
    python3 -c 'import json,sys; [print(r["loss"]) for r in map(json.loads, open(sys.argv[1])) if r["event"] == "step"]' "$1"
}

# the summary's device rows of a metrics file (under mpirun summed over the
# units): lookups hits misses write_backs, or with $2 the fields it names
rows_stats() {
    python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["event"] == "summary"][-1]["rows"][0]
print(json.dumps({k: r[k] for k in (sys.argv[2] or "lookups hits misses write_backs").split()}))' "$1" "${2:-}"
}

@test "rows: the planner's hbm stage runs with its rows in device memory, bit for bit as host tables" {
    run json_field "$DATA/hbm.json" '[(s["rows"], s["executed_as"]) for s in d["stages"]]'
    [ "$output" = "[('hbm', 'hbm')]" ]
    run json_field "$DATA/servers.json" '[(s["rows"], s["executed_as"]) for s in d["stages"]]'
    [ "$output" = "[('servers', 'servers')]" ]
    "$HPS_BIN/hps-train" --plan "$DATA/hbm.json" --data "$DATA/few" --threads 1 --cpu-fallback -q \
        --metrics "$TMP/m.ndjson" --micro-batches 3 --export "$TMP/hbm.safetensors"
    run json_field <(tail -1 "$TMP/m.ndjson") '(d["rows"][0]["rows"], d["rows"][0]["misses"] == d["tables"][0]["rows"], d["rows"][0]["write_backs"])'
    [ "$output" = "('hbm', True, 0)" ]   # every row fetched once, when created; none leaves
    diff <(losses "$DATA/servers.ndjson") <(losses "$TMP/m.ndjson")
    cmp "$DATA/servers.safetensors" "$TMP/hbm.safetensors"
}

@test "rows: a cache of 10% of the rows trains bit for bit as host tables: evicted rows are written back" {
    "$HPS_BIN/hps-train" --plan "$DATA/cache.json" --data "$DATA/few" --threads 1 --cpu-fallback -q \
        --metrics "$TMP/m.ndjson" --micro-batches 3 --export "$TMP/cache.safetensors" --eval "$DATA/few"
    run json_field <(tail -1 "$TMP/m.ndjson") '(d["rows"][0]["capacity"], d["rows"][0]["write_backs"] > d["rows"][0]["capacity"])'
    [ "$output" = "($(cat "$DATA/capacity"), True)" ]
    diff <(losses "$DATA/servers.ndjson") <(losses "$TMP/m.ndjson")
    cmp "$DATA/servers.safetensors" "$TMP/cache.safetensors"
    # evaluation reads the rows where they are, cached or not
    "$HPS_BIN/hps-train" --plan "$DATA/servers.json" --data "$DATA/few" --threads 1 --cpu-fallback -q \
        --metrics "$TMP/s.ndjson" --micro-batches 3 --eval "$DATA/few"
    diff <(grep '"event":"eval"' "$TMP/s.ndjson") <(grep '"event":"eval"' "$TMP/m.ndjson")
}

@test "rows: the cache's hits, misses and write-backs equal a replay of the key stream" {
    "$HPS_BIN/hps-train" --plan "$DATA/cache.json" --data "$DATA/few" --threads 1 --cpu-fallback -q \
        --metrics "$TMP/m.ndjson" --micro-batches 3
    want=$(python3 "$BATS_TEST_DIRNAME/cache_replay.py" "$MODEL" "$DATA/few.tsv" 256 3 "$(cat "$DATA/capacity")")
    [ "$(rows_stats "$TMP/m.ndjson")" = "$want" ] || { echo "got $(rows_stats "$TMP/m.ndjson"), replay $want"; false; }
    # per epoch too, and the plan's figure beside them
    run json_field <(grep '"event":"epoch"' "$TMP/m.ndjson") '(d["epoch"], d["rows"][0]["rows"], "predicted_hit_rate" in d["rows"][0])'
    [ "$output" = "(1, 'cache', True)" ]
}

@test "rows: a killed run resumes with a warm cache and ends like a whole one, counts included" {
    args=(--plan "$DATA/cache.json" --data "$DATA/few" --epochs 2 --threads 1 --cpu-fallback --micro-batches 3)
    "$HPS_BIN/hps-train" "${args[@]}" -q --export "$TMP/whole.safetensors" --metrics "$TMP/whole.ndjson"
    run env HPS_TRAIN_KILL_AT_STEP=97 "$HPS_TEST_BIN/hps-train" "${args[@]}" -q \
        --checkpoint "$TMP/ckpt" --checkpoint-every 20 --metrics "$TMP/resumed.ndjson"
    [ "$status" -eq 137 ]
    run "$HPS_BIN/hps-train" "${args[@]}" --checkpoint "$TMP/ckpt" --checkpoint-every 20 \
        --resume --export "$TMP/resumed.safetensors" --metrics "$TMP/resumed.ndjson"
    [ "$status" -eq 0 ]
    [[ "$output" == *"resuming at step 80"* ]] || { echo "$output"; false; }
    cmp "$TMP/whole.safetensors" "$TMP/resumed.safetensors"
    # the counts go on from the checkpoint's, with the rows it had cached
    whole=$(rows_stats "$TMP/whole.ndjson")
    [[ "$whole" == '{"lookups": '* ]]
    [ "$(rows_stats "$TMP/resumed.ndjson")" = "$whole" ]
}

@test "rows: a plan hps-train cannot run is refused before any work, naming the stage" {
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); del p["stages"][0]["cache_rows"]; json.dump(p, open(sys.argv[2], "w"))' \
        "$DATA/cache.json" "$TMP/nocap.json"
    run "$HPS_BIN/hps-train" --plan "$TMP/nocap.json" --data "$DATA/few" --threads 1 --cpu-fallback \
        --metrics "$TMP/m.ndjson"
    [ "$status" -eq 2 ]
    [ "$output" = "hps-train: error: $TMP/nocap.json: stage 0: rows: cache without cache_rows: re-run hps-plan" ] || { echo "$output"; false; }
    [ ! -e "$TMP/m.ndjson" ]
    run "$HPS_BIN/hps-train" --plan "$DATA/hbm.json" --data "$DATA/few" --threads 1 --cpu-fallback \
        --max-table-mb 1 --evict
    [ "$status" -eq 2 ]
    [[ "$output" == *"hbm.json: stage 0: rows: hbm keeps rows in device memory: --evict cannot run with it" ]]
}

@test "rows: --cpu-fallback says the GPU stages ran on the CPU, with no error against the plan" {
    run "$HPS_BIN/hps-train" --plan "$DATA/hbm.json" --data "$DATA/few" --threads 1 --cpu-fallback \
        --metrics "$TMP/m.ndjson" --steps 5
    [ "$status" -eq 0 ]
    [[ "$output" == *"on the plan's GPUs; its GPU stages ran on the CPU (--cpu-fallback)"* ]] || { echo "$output"; false; }
    [[ "$output" == *"stage 0:"*"computing on the CPU, predicted"*"on its GPU"* ]]
    [[ "$output" != *"%)"* ]]
    run json_field <(tail -1 "$TMP/m.ndjson") '(d["cpu_fallback"], d["error"], d["stages"][0]["ran_on_cpu"], d["stages"][0]["error"])'
    [ "$output" = "(True, None, True, None)" ]
}

# Under mpirun (hps-train(1) ROWS, several units): rows: hbm on 2 units is a
# replica of every row a worker, the touched rows' gradients exchanged each
# step and summed in worker order.

# the hbm plan on K units (ranks 0 to K-1, an equal share of the batch each;
# 2 by default); no servers
hbm_on_2() {
    python3 -c 'import json,sys; p = json.load(open(sys.argv[1])); k = int(sys.argv[3])
assert p["servers"]["count"] == 0 and len(p["workers"]) == 1, p
p["stages"][0]["units"] = k
p["workers"] = [dict(p["workers"][0], rank=r, share=1 / k, batch_share=1 / k) for r in range(k)]
if sys.argv[4]: p["stages"][0]["rows_split"] = sys.argv[4]
json.dump(p, open(sys.argv[2], "w"))' "$DATA/hbm.json" "$1" "${2:-2}" "${3:-}"
}

# the same with its rows in K shards (rows_split: shards, hps-plan(5))
shards_on() {
    hbm_on_2 "$1" "$2" shards
}

# the rows the lead's own shard held at the last step (its dist record)
shard_rows() {
    python3 -c 'import json,sys; print([json.loads(l)["dist"]["shard_rows"] for l in open(sys.argv[1]) if json.loads(l)["event"] == "step"][-1])' "$1"
}

# the one eval record of two metrics files: within 1e-4 relative (sums in
# another order)
one_eval_near() {
    paste <(evals "$1") <(evals "$2") > "$TMP/ev"
    [ "$(wc -l < "$TMP/ev")" -eq 1 ]
    awk '{for (i = 1; i <= 2; i++) {d = $i - $(i + 2); if (d < 0) d = -d; if (d > 1e-4 * $i) bad++}}
         END {exit bad > 0}' "$TMP/ev"
}

mpik() {
    command -v mpirun >/dev/null || skip "mpirun is not installed (make deps: openmpi-bin)"
    built_with_mpi "$HPS_BIN/hps-train" || skip "hps-train was built without Open MPI (make MPI=0)"
    mpi_test_env
    local k=$1
    shift
    timeout 120 mpirun --oversubscribe -np "$k" "$@"
}

mpi2() {
    mpik 2 "$@"
}

# PLAN on 2 ranks (or $2), 2 epochs: a run stopped at step 100 with a
# checkpoint in $TMP/ck and resumed ends with the losses and the rows of a
# whole run
resumes_whole() {
    local k=${2:-2}
    args=(--plan "$1" --data "$DATA/few" --threads 1 --cpu-fallback -q --no-rebalance --epochs 2)
    mpik "$k" "$HPS_BIN/hps-train" "${args[@]}" --metrics "$TMP/full.ndjson" --metrics-interval 0 \
        --export "$TMP/full.safetensors"
    mpik "$k" "$HPS_BIN/hps-train" "${args[@]}" --steps 100 --checkpoint "$TMP/ck"
    mpik "$k" "$HPS_BIN/hps-train" "${args[@]}" --checkpoint "$TMP/ck" --resume --metrics "$TMP/res.ndjson" \
        --metrics-interval 0 --export "$TMP/res.safetensors"
    losses "$TMP/full.ndjson" | tail -n +101 > "$TMP/a"
    losses "$TMP/res.ndjson" > "$TMP/b"
    [ "$(wc -l < "$TMP/b")" -gt 20 ]
    cmp "$TMP/a" "$TMP/b"
    cmp "$TMP/full.safetensors" "$TMP/res.safetensors"
}

@test "rows: hbm replicas on 2 ranks follow one process's losses; on 2 and 3 they stay equal" {
    hbm_on_2 "$TMP/hbm2.json"
    "$HPS_BIN/hps-train" --plan "$DATA/hbm.json" --data "$DATA/few" --threads 1 --cpu-fallback -q \
        --metrics "$TMP/one.ndjson" --micro-batches 2 --export "$TMP/one.safetensors" --eval "$DATA/few"
    args=(--plan "$TMP/hbm2.json" --data "$DATA/few" --threads 1 --cpu-fallback -q --no-rebalance)
    mpi2 "$HPS_TEST_BIN/hps-train" "${args[@]}" --metrics "$TMP/two.ndjson" --export "$TMP/r0.safetensors" \
        --eval "$DATA/few"
    # the dense gradients' allreduce adds in another order than one process's
    # micro-batches (as rows: servers under mpirun): within 1e-4
    same_losses "$TMP/one.ndjson" "$TMP/two.ndjson"
    # the summary's device rows are every unit's: each looks up its slice's
    # keys, so together every lookup of the global batch, once
    [ "$(rows_stats "$TMP/two.ndjson" lookups)" = "$(rows_stats "$TMP/one.ndjson" lookups)" ]
    # the lead evaluates on its replica
    one_eval_near "$TMP/one.ndjson" "$TMP/two.ndjson"
    same_export "$TMP/one.safetensors" "$TMP/r0.safetensors"
    # no server: the workers sent each other their rows' gradients
    [ "$(dist_field "$TMP/two.ndjson" '(o["workers"], o["servers"], o["per_rank"][1]["bytes_sent"] > 0)')" = "(2, 0, True)" ]
    # worker 1's replica exported by the lead: the same bytes as worker 0's
    HPS_TRAIN_EXPORT_REPLICA=1 mpi2 "$HPS_TEST_BIN/hps-train" "${args[@]}" --export "$TMP/r1.safetensors"
    cmp "$TMP/r0.safetensors" "$TMP/r1.safetensors"
    # 3 units, where the order of a row's sum matters: every replica adds in worker order
    hbm_on_2 "$TMP/hbm3.json" 3
    args=(--plan "$TMP/hbm3.json" --data "$DATA/few" --threads 1 --cpu-fallback -q --no-rebalance --steps 30)
    mpik 3 "$HPS_TEST_BIN/hps-train" "${args[@]}" --export "$TMP/k0.safetensors"
    HPS_TRAIN_EXPORT_REPLICA=2 mpik 3 "$HPS_TEST_BIN/hps-train" "${args[@]}" --export "$TMP/k2.safetensors"
    cmp "$TMP/k0.safetensors" "$TMP/k2.safetensors"
}

# Shards (rows_split: shards): each unit holds the rows the routing rule
# gives it; a step's keys go to their owners, the rows' values back, and the
# gradients to the owners, which sum the workers' parts in worker order as
# replicas do: the same floats, so a sharded run is the replicated one bit
# for bit (and that one follows one process within 1e-4, above).
@test "rows: hbm shards on 2 and 3 ranks train, evaluate and export bit for bit as replicas" {
    for k in 2 3; do
        hbm_on_2 "$TMP/rep$k.json" $k
        shards_on "$TMP/sh$k.json" $k
        args=(--data "$DATA/few" --threads 1 --cpu-fallback -q --no-rebalance --eval "$DATA/few")
        mpik $k "$HPS_BIN/hps-train" --plan "$TMP/rep$k.json" "${args[@]}" --metrics "$TMP/rep$k.ndjson" \
            --export "$TMP/rep$k.safetensors"
        mpik $k "$HPS_BIN/hps-train" --plan "$TMP/sh$k.json" "${args[@]}" --metrics "$TMP/sh$k.ndjson" \
            --export "$TMP/sh$k.safetensors"
        losses "$TMP/rep$k.ndjson" > "$TMP/a"
        losses "$TMP/sh$k.ndjson" > "$TMP/b"
        [ "$(wc -l < "$TMP/b")" -gt 70 ]
        cmp "$TMP/a" "$TMP/b"
        evals "$TMP/rep$k.ndjson" > "$TMP/a"
        evals "$TMP/sh$k.ndjson" > "$TMP/b"
        [ "$(wc -l < "$TMP/b")" -eq 1 ]
        cmp "$TMP/a" "$TMP/b"
        # the export gathers every shard at the lead
        cmp "$TMP/rep$k.safetensors" "$TMP/sh$k.safetensors"
        # the lead holds its share of the rows only, about 1/k of them
        all=$(python3 -c 'import json,sys; print(sum(t["rows"] for t in json.loads(open(sys.argv[1]).readlines()[-1])["tables"]))' "$DATA/servers.ndjson")
        mine=$(shard_rows "$TMP/sh$k.ndjson")
        [ "$mine" -gt $((all / k * 8 / 10)) ] && [ "$mine" -lt $((all / k * 12 / 10)) ] || { echo "$mine of $all"; false; }
    done
}

@test "rows: a plan's rows_split other than replicas or shards is refused naming the stage" {
    hbm_on_2 "$TMP/bad.json" 2 halves
    run "$HPS_BIN/hps-train" --plan "$TMP/bad.json" --data "$DATA/few" --cpu-fallback --metrics "$TMP/m.ndjson"
    [ "$status" -eq 2 ]
    [[ "$output" == *"hps-train: error: "*"bad.json: stage 0: rows_split 'halves' must be one of replicas|shards"* ]] || { echo "$output"; false; }
    [ ! -e "$TMP/m.ndjson" ]
}

@test "rows: hbm shards under mpirun resume from the committed step to the same losses and rows" {
    shards_on "$TMP/sh2.json" 2
    resumes_whole "$TMP/sh2.json"
    # each unit keeps its shard beside its own checkpoint
    [ -s "$TMP/ck/rank-0/shard/ckpt-000000000100.hpsckpt" ]
    [ -s "$TMP/ck/rank-1/shard/ckpt-000000000100.hpsckpt" ]
}

# rows: cache under mpirun: shards again, each unit's in its host table
# behind a cache of the plan's cache_rows (10% of all the rows here).
@test "rows: a cache on 2 ranks trains bit for bit as hbm shards, its statistics summed, and resumes" {
    shards_on "$TMP/sh2.json" 2
    python3 -c 'import json,sys; p = json.load(open(sys.argv[1])); c = json.load(open(sys.argv[2]))
for st in p["stages"]: st["rows"], st["executed_as"], st["cache_rows"] = "cache", "cache", c["stages"][0]["cache_rows"]
json.dump(p, open(sys.argv[3], "w"))' "$TMP/sh2.json" "$DATA/cache.json" "$TMP/c2.json"
    args=(--data "$DATA/few" --threads 1 --cpu-fallback -q --no-rebalance --epochs 2)
    mpi2 "$HPS_BIN/hps-train" --plan "$TMP/sh2.json" "${args[@]}" --metrics "$TMP/sh.ndjson" --metrics-interval 0 \
        --export "$TMP/sh.safetensors" --eval "$DATA/few"
    mpi2 "$HPS_BIN/hps-train" --plan "$TMP/c2.json" "${args[@]}" --metrics "$TMP/c.ndjson" --metrics-interval 0 \
        --export "$TMP/c.safetensors" --eval "$DATA/few"
    # evicted rows' updates are written back: nothing lost
    losses "$TMP/sh.ndjson" > "$TMP/a"
    losses "$TMP/c.ndjson" > "$TMP/b"
    [ "$(wc -l < "$TMP/b")" -gt 150 ]
    cmp "$TMP/a" "$TMP/b"
    cmp <(evals "$TMP/sh.ndjson") <(evals "$TMP/c.ndjson")
    cmp "$TMP/sh.safetensors" "$TMP/c.safetensors"
    # summed over the units: one process's lookups, for hbm shards and the
    # cache (an owner counts a worker's lookups of the rows it reads, not the
    # reads), a hit or a miss each but a staged row's later ones in its step
    # (hps-train(1) ROWS), and every miss but the rows still cached at the
    # end written back
    cap=$(cat "$DATA/capacity")
    python3 - "$TMP/sh.ndjson" "$TMP/c.ndjson" "$cap" "$BATS_TEST_DIRNAME" "$MODEL" "$DATA/few.tsv" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[4])
sys.dont_write_bytecode = True  # nothing written into the source tree
from cache_replay import layers_of
summary = lambda f: [json.loads(l) for l in open(f) if json.loads(l)["event"] == "summary"][-1]
h, c, cap = summary(sys.argv[1])["rows"][0], summary(sys.argv[2]), int(sys.argv[3])
stage, c = c["stages"][0], c["rows"][0]
# one process's lookups (a replay checks them above): every key of every
# sample, once per table layer of its slot, in each of the 2 epochs
model = json.load(open(sys.argv[5]))
layers, dense, one = layers_of(model), model["input"].get("dense", 0), 0
for line in open(sys.argv[6]):
    keys = [len([k for k in col.split(",") if k]) for col in line.rstrip("\n").split("\t")[1 + dense:]]
    one += 2 * sum(keys[s] for slots in layers for s in slots)
assert h["capacity"] is None and h["write_backs"] == 0 and h["misses"] == h["lookups"] - h["hits"], h
assert h["lookups"] == one, (h, one)
assert c["capacity"] == cap and c["lookups"] == h["lookups"] and c["hits"] + c["misses"] <= c["lookups"], (c, h)
assert c["write_backs"] > 0 and c["misses"] - c["write_backs"] == 2 * cap, (c, cap)
assert c["hits"] < h["hits"], (c, h)
# where the stage kept its rows, as --calibrate reads it: the units' hit rate
assert (stage["rows"], stage["cache_rows"], stage["hit_rate"]) == ("cache", cap, c["hit_rate"]), (stage, c)
PY
    # the counts are every owner's: a replay of the units' reads (each
    # step, each unit's distinct rows from their owners, each weighted by
    # the unit's lookups of it) gives them all, and so the cache's hit rate
    # (the metrics' 7 digits)
    for f in sh:100000000 c:$cap; do
        want=$(python3 "$BATS_TEST_DIRNAME/cache_replay.py" "$MODEL" "$DATA/few.tsv" 256 1 "${f#*:}" 2 2)
        [ "$(rows_stats "$TMP/${f%:*}.ndjson")" = "$want" ] || { echo "$f: got $(rows_stats "$TMP/${f%:*}.ndjson"), replay $want"; false; }
    done
    python3 -c 'import json,sys; c, w = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert c["hit_rate"] == float("%.7g" % (w["hits"] / w["lookups"])), (c, w)' "$(rows_stats "$TMP/c.ndjson" hit_rate)" "$want"
    # hps-plan --calibrate prices the stage's cache at that hit rate
    rate=$(rows_stats "$TMP/c.ndjson" hit_rate | python3 -c 'import json,sys; print("%.4f" % json.load(sys.stdin)["hit_rate"])')
    run "$HPS_BIN/hps-plan" -m "$MODEL" -c "$TESTDATA/clusters/lab.json" -p "$DATA/p.json" --min-throughput 20000 \
        --algo exact --calibrate "$TMP/c.ndjson" -o "$TMP/cal.json"
    [ "$status" -eq 0 ] && [[ "$output" == *"rows cache of $cap at the run's hit rate $rate"* ]] || { echo "$output"; false; }
    # a killed run resumes (with a cold cache) to the same losses and rows
    resumes_whole "$TMP/c2.json"
}

@test "rows: hbm replicas under mpirun resume from the committed step to the same losses and rows" {
    hbm_on_2 "$TMP/hbm2.json"
    resumes_whole "$TMP/hbm2.json"
}

# PLAN ($1) cut into two stages, one a rank, to $2
two_stages() {
    python3 -c 'import json,sys; p = json.load(open(sys.argv[1])); s = p["stages"][0]
p["stages"] = [dict(s, index=0, layers=[0, 2], units=1), dict(s, index=1, layers=[3, 5], units=1)]
p["workers"] = [dict(p["workers"][0], rank=r, stage=r, share=1) for r in (0, 1)]
json.dump(p, open(sys.argv[2], "w"))' "$1" "$2"
}

# $DATA/hbm.json cut as hps-plan cuts dlrm-small on lab.json at 200000
# samples/s (on a quiet machine's profile; a test of that choice would hang
# on the measured cpu times, so none): stage 0 the embedding layer, its rows in HBM,
# on K units (replicas), stage 1 the dense layers on one cpu unit; to $1
emb_then_dense() {
    python3 -c 'import json,sys; p = json.load(open(sys.argv[1])); s = p["stages"][0]; k = int(sys.argv[3])
p["stages"] = [dict(s, index=0, layers=[0, 0], units=k),
               dict(s, index=1, layers=[1, 5], units=1, type="cpu", kind="cpu", device="cpu", rows="none",
                    executed_as="none", rows_split=None)]
w = p["workers"][0]
p["workers"] = [dict(w, rank=r, stage=0, share=1 / k, batch_share=1 / k) for r in range(k)] + \
               [dict(w, rank=k, stage=1, type="cpu", share=0.0, batch_share=1.0)]
json.dump(p, open(sys.argv[2], "w"))' "$DATA/hbm.json" "$1" "${2:-1}"
}

# Such a plan under mpirun: stage 0's units hold replicas of its rows and
# exchange its gradients among themselves (not with stage 1's, which holds
# none); the dense allreduce and the stages' micro-batches add in other
# orders than one process, so within 1e-4 as the replicas are (above).
@test "rows: under mpirun hbm replicas in stage 0 of two stages train as one process does" {
    emb_then_dense "$TMP/st1.json" 1
    emb_then_dense "$TMP/st2.json" 2
    args=(--data "$DATA/few" --threads 1 --cpu-fallback -q --no-rebalance --eval "$DATA/few")
    "$HPS_BIN/hps-train" --plan "$TMP/st1.json" "${args[@]}" --micro-batches 2 --metrics "$TMP/one.ndjson" \
        --export "$TMP/one.safetensors"
    mpi2 "$HPS_BIN/hps-train" --plan "$TMP/st1.json" "${args[@]}" --metrics "$TMP/two.ndjson" \
        --export "$TMP/two.safetensors"
    mpik 3 "$HPS_BIN/hps-train" --plan "$TMP/st2.json" "${args[@]}" --metrics "$TMP/three.ndjson" \
        --export "$TMP/three.safetensors"
    for n in two three; do
        same_losses "$TMP/one.ndjson" "$TMP/$n.ndjson"
        one_eval_near "$TMP/one.ndjson" "$TMP/$n.ndjson"
        same_export "$TMP/one.safetensors" "$TMP/$n.safetensors"
    done
    # stage 0's two replicas exchanged gradients; stage 1's rank sent none
    # (it holds no rows), only its cut's gradients back to stage 0
    [ "$(dist_field "$TMP/three.ndjson" '(o["workers"], o["servers"])')" = "(3, 0)" ]
    # a resumed run ends like a whole one
    resumes_whole "$TMP/st1.json"
}

# emb_then_dense's plan ($1, K units in stage 0: $2) with stage 0's rows as
# $3 says: shards (rows_split: shards) or cache (the cache of 10% of the rows
# a unit), in front of $4 servers of stage 0's own (0: none), on the ranks
# after the workers
stage0_rows() {
    emb_then_dense "$TMP/base.json" "$2"
    python3 -c 'import json,sys; p = json.load(open(sys.argv[1])); how, n = sys.argv[3], int(sys.argv[4])
s = p["stages"][0]
if how == "shards": s["rows_split"] = "shards"
else: s["rows"], s["executed_as"], s["cache_rows"] = "cache", "cache", int(open(sys.argv[5]).read())
p["stages"][0]["servers"], p["stages"][1]["servers"] = n, 0
p["servers"] = dict(p["servers"], count=n, ranks=list(range(len(p["workers"]), len(p["workers"]) + n)))
json.dump(p, open(sys.argv[2], "w"))' "$TMP/base.json" "$1" "$3" "${4:-0}" "$DATA/capacity"
}

# the last step's device rows of a metrics file (summed over the units as
# the step's dense reduction left them)
device_rows() {
    python3 -c 'import json,sys; print(json.dumps([json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["event"] == "step"][-1]["dist"]["device_rows"]))' "$1"
}

# Stage 0's units shard its rows (and their caches) by key among
# themselves: the routing rule over the stage's units, the all-to-alls among
# the stage's ranks (stage 1's holds no rows).  A row's gradient is summed
# over stage 0's units in their order as its replicas sum it, and a cache
# writes back what it evicts: the same floats, so shards and caches train,
# evaluate and export bit for bit as the replicas of the same stages (those
# follow one process within 1e-4, the test above), and as the same shards in
# one stage within 1e-4.
@test "rows: under mpirun hbm shards and a cache in stage 0 of two stages train bit for bit as its replicas, as one stage within 1e-4" {
    args=(--data "$DATA/few" --threads 1 --cpu-fallback -q --no-rebalance --eval "$DATA/few" --epochs 2
          --metrics-interval 0)
    emb_then_dense "$TMP/rep1.json" 1
    emb_then_dense "$TMP/rep2.json" 2
    stage0_rows "$TMP/c1.json" 1 cache
    stage0_rows "$TMP/sh2.json" 2 shards
    stage0_rows "$TMP/c2.json" 2 cache
    for p in rep1 c1; do
        mpi2 "$HPS_BIN/hps-train" --plan "$TMP/$p.json" "${args[@]}" --metrics "$TMP/$p.ndjson" \
            --export "$TMP/$p.safetensors"
    done
    for p in rep2 sh2 c2; do
        mpik 3 "$HPS_BIN/hps-train" --plan "$TMP/$p.json" "${args[@]}" --metrics "$TMP/$p.ndjson" \
            --export "$TMP/$p.safetensors"
    done
    for pair in "rep1 c1" "rep2 sh2" "rep2 c2"; do
        read -r a b <<< "$pair"
        losses "$TMP/$a.ndjson" > "$TMP/a"
        losses "$TMP/$b.ndjson" > "$TMP/b"
        [ "$(wc -l < "$TMP/b")" -gt 150 ]
        cmp "$TMP/a" "$TMP/b" || { echo "$pair: losses differ"; false; }
        evals "$TMP/$a.ndjson" > "$TMP/a"
        evals "$TMP/$b.ndjson" > "$TMP/b"
        [ "$(wc -l < "$TMP/b")" -eq 2 ]
        cmp "$TMP/a" "$TMP/b" || { echo "$pair: evals differ"; false; }
        # the export gathers stage 0's shards at the lead
        cmp "$TMP/$a.safetensors" "$TMP/$b.safetensors"
    done
    # the same shards in one stage of 2 ranks: their rows the same floats,
    # but the dense layers' gradients add in another order (an allreduce of
    # 2 ranks, not stage 1's one): within 1e-4
    shards_on "$TMP/one.json" 2
    mpi2 "$HPS_BIN/hps-train" --plan "$TMP/one.json" "${args[@]}" --metrics "$TMP/one.ndjson" \
        --export "$TMP/one.safetensors"
    same_losses "$TMP/one.ndjson" "$TMP/sh2.ndjson"
    same_evals "$TMP/one.ndjson" "$TMP/sh2.ndjson"
    same_export "$TMP/one.safetensors" "$TMP/sh2.safetensors"
    # the caches evicted and wrote back every miss but what each of stage
    # 0's units still holds (the summary's counts, summed over them)
    cap=$(cat "$DATA/capacity")
    for f in c1:1 c2:2; do
        rows_stats "$TMP/${f%:*}.ndjson" "capacity misses write_backs" | python3 -c 'import json,sys; c = json.load(sys.stdin); cap, k = map(int, sys.argv[1:])
assert c["capacity"] == cap and c["write_backs"] > 0 and c["misses"] - c["write_backs"] == k * cap, c' "$cap" "${f#*:}"
    done
    # each of stage 0's two units held about half the rows
    all=$(python3 -c 'import json,sys; print(sum(t["rows"] for t in json.loads(open(sys.argv[1]).readlines()[-1])["tables"]))' "$DATA/servers.ndjson")
    mine=$(shard_rows "$TMP/sh2.ndjson")
    [ "$mine" -gt $((all * 4 / 10)) ] && [ "$mine" -lt $((all * 6 / 10)) ] || { echo "$mine of $all"; false; }
    # a killed run resumes to the same losses and rows
    resumes_whole "$TMP/sh2.json" 3
}

# The planner's cache with a server behind it, in stage 0 of two stages:
# the server holds stage 0's rows, stage 0's units their caches' shards;
# only a row's owner unit gets or puts it, so bit for bit the cache over
# shards of the same stages.
@test "rows: under mpirun a cache in front of a server in stage 0 of two stages trains bit for bit as one over shards, and resumes" {
    args=(--data "$DATA/few" --threads 1 --cpu-fallback -q --no-rebalance --eval "$DATA/few" --epochs 2
          --metrics-interval 0)
    stage0_rows "$TMP/c2.json" 2 cache
    stage0_rows "$TMP/cs.json" 2 cache 1
    mpik 3 "$HPS_BIN/hps-train" --plan "$TMP/c2.json" "${args[@]}" --metrics "$TMP/c2.ndjson" \
        --export "$TMP/c2.safetensors"
    mpik 4 "$HPS_BIN/hps-train" --plan "$TMP/cs.json" "${args[@]}" --metrics "$TMP/cs.ndjson" \
        --export "$TMP/cs.safetensors"
    losses "$TMP/c2.ndjson" > "$TMP/a"
    [ "$(wc -l < "$TMP/a")" -gt 150 ]
    cmp "$TMP/a" <(losses "$TMP/cs.ndjson")
    cmp <(evals "$TMP/c2.ndjson") <(evals "$TMP/cs.ndjson")
    cmp "$TMP/c2.safetensors" "$TMP/cs.safetensors"
    [ "$(dist_field "$TMP/cs.ndjson" '(o["workers"], o["servers"])')" = "(3, 1)" ]
    [ "$(device_rows "$TMP/cs.ndjson")" = "$(device_rows "$TMP/c2.ndjson")" ]
    # the server served the misses' states and the lead's evaluation
    [ "$(rows_served "$TMP/cs.ndjson")" -gt 0 ]
    resumes_whole "$TMP/cs.json" 4
    [ -s "$TMP/ck/rank-3/ckpt-000000000100.hpsckpt" ]
}

# What stays refused under mpirun: device rows in a stage other than the
# lead's (a cache or shards in stage 0 run, above), and device rows beside
# servers' rows.
@test "rows: under mpirun a later stage's device rows, or servers' rows beside them, are refused naming the stage" {
    # device rows in one stage, servers' in another
    two_stages "$DATA/hbm.json" "$TMP/hst2.json"
    python3 -c 'import json,sys; p = json.load(open(sys.argv[1])); p["stages"][1]["rows"] = "servers"
p["servers"] = dict(p["servers"], count=1, ranks=[2])
json.dump(p, open(sys.argv[2], "w"))' "$TMP/hst2.json" "$TMP/mix.json"
    run mpik 3 "$HPS_BIN/hps-train" --plan "$TMP/mix.json" --data "$DATA/few" --threads 1 --cpu-fallback
    [ "$status" -eq 2 ]
    [[ "$output" == *"mix.json: stage 1 keeps its embedding rows on servers (rows: servers) beside another stage's in device memory: hps-train under mpirun runs one or the other"* ]] || { echo "$output"; false; }

    # a later stage's table in HBM: the lead (stage 0) would evaluate and
    # export without its rows
    local m=$TESTDATA/models/wide-deep.json
    "$HPS_BIN/hps-shard" -q -m "$m" -o "$TMP/wfew" "$DATA/rows.tsv"
    "$HPS_BIN/hps-profile" --machine "$(machine_profile)" -m "$m" --reps 1 --warmup 0 --no-scaling \
        --estimate "$TESTDATA/devices/gpu-t4.json" > "$TMP/p.json" 2>/dev/null
    "$HPS_BIN/hps-plan" -m "$m" -c "$TESTDATA/clusters/lab.json" -p "$TMP/p.json" \
        --min-throughput 20000 --algo exact -o "$TMP/wd.json"
    python3 -c 'import json,sys; p = json.load(open(sys.argv[1])); s = p["stages"][0]; w = p["workers"][0]
assert s["rows"] == "hbm" and len(p["stages"]) == 1, s
p["stages"] = [dict(s, index=0, layers=[0, 0]), dict(s, index=1, layers=[1, 7])]
p["workers"] = [dict(w, rank=0, stage=0), dict(w, rank=1, stage=1, share=0.0)]
json.dump(p, open(sys.argv[2], "w"))' "$TMP/wd.json" "$TMP/wd2.json"
    run mpi2 "$HPS_BIN/hps-train" --plan "$TMP/wd2.json" --data "$TMP/wfew" --threads 1 --cpu-fallback -q
    [ "$status" -eq 2 ]
    [[ "$output" == *"wd2.json: stage 1 keeps the rows of layer 1 ('wide') in HBM (rows: hbm): hps-train under mpirun runs device rows in a plan of several stages in the lead's stage (0) only, which evaluates and exports"* ]] || { echo "$output"; false; }
    # a later stage's cache likewise
    python3 -c 'import json,sys; p = json.load(open(sys.argv[1])); s = p["stages"][1]
s["rows"], s["executed_as"], s["cache_rows"] = "cache", "cache", 100
json.dump(p, open(sys.argv[2], "w"))' "$TMP/wd2.json" "$TMP/wdc.json"
    run mpi2 "$HPS_BIN/hps-train" --plan "$TMP/wdc.json" --data "$TMP/wfew" --threads 1 --cpu-fallback -q
    [ "$status" -eq 2 ]
    [[ "$output" == *"wdc.json: stage 1 keeps the rows of layer 1 ('wide') in a cache (rows: cache): hps-train under mpirun runs device rows in a plan of several stages in the lead's stage (0) only"* ]] || { echo "$output"; false; }
    # in one process it runs
    "$HPS_BIN/hps-train" --plan "$TMP/wd2.json" --data "$TMP/wfew" --threads 1 --cpu-fallback -q --steps 3
}

@test "rows: --continue-from under mpirun: shards load their day's rows and train as replicas do" {
    hbm_on_2 "$TMP/rep.json"
    shards_on "$TMP/sh.json" 2
    args=(--data "$DATA/few" --threads 1 --cpu-fallback -q --no-rebalance --steps 20)
    for p in rep sh; do
        mpi2 "$HPS_BIN/hps-train" --plan "$TMP/$p.json" "${args[@]}" --checkpoint "$TMP/${p}1"
        run mpi2 "$HPS_BIN/hps-train" --plan "$TMP/$p.json" "${args[@]}" --continue-from "$TMP/${p}1" \
            --metrics "$TMP/$p.ndjson" --export "$TMP/$p.safetensors"
        echo "$p: $output"
        [ "$status" -eq 0 ]
        losses "$TMP/$p.ndjson" > "$TMP/$p.losses"
        [ "$(wc -l < "$TMP/$p.losses")" -eq 20 ]
    done
    # shards train bit for bit as replicas, day 2 included (a shard that
    # started the day empty would not)
    cmp "$TMP/rep.losses" "$TMP/sh.losses"
    cmp "$TMP/rep.safetensors" "$TMP/sh.safetensors"
}

@test "rows: the shards reach the lead in pieces (MPI's int counts): the export and eval are the same" {
    # a unit's shard may pass 2 GiB; the test build's HPS_TRAIN_GATHER_PIECE
    # makes the pieces 333 bytes, so every shard goes in many, ends uneven
    shards_on "$TMP/sh3.json" 3
    args=(--plan "$TMP/sh3.json" --data "$DATA/few" --threads 1 --cpu-fallback -q --no-rebalance
          --eval "$DATA/few" --steps 30)
    mpik 3 "$HPS_TEST_BIN/hps-train" "${args[@]}" --metrics "$TMP/a.ndjson" --export "$TMP/a.safetensors"
    HPS_TRAIN_GATHER_PIECE=333 mpik 3 "$HPS_TEST_BIN/hps-train" "${args[@]}" --metrics "$TMP/b.ndjson" \
        --export "$TMP/b.safetensors"
    cmp "$TMP/a.safetensors" "$TMP/b.safetensors"
    evals "$TMP/a.ndjson" > "$TMP/ea"
    evals "$TMP/b.ndjson" > "$TMP/eb"
    [ "$(wc -l < "$TMP/eb")" -eq 1 ]
    cmp "$TMP/ea" "$TMP/eb"
}

# $DATA/cache.json on 2 units to $1, with $2 servers behind the cache (0:
# none, a cache over each unit's shard)
cache_on_2() {
    python3 -c 'import json,sys; p = json.load(open(sys.argv[1])); k = int(sys.argv[3])
p["stages"][0]["units"] = 2
p["workers"] = [dict(p["workers"][0], rank=r, share=0.5, batch_share=0.5) for r in (0, 1)]
p["servers"] = dict(p["servers"], count=k, ranks=list(range(2, 2 + k)))
json.dump(p, open(sys.argv[2], "w"))' "$DATA/cache.json" "$1" "$2"
}

# the "dist" record's rows_served of each server, one a line
rows_served() {
    python3 -c 'import json,sys; o = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["event"] == "dist"][-1]
[print(int(r["rows_served"])) for r in o["per_rank"] if r["role"] == "server"]' "$1"
}

# The planner's cache has servers behind it: the units keep their shards of
# the hot rows, the servers every row.  Only a row's owner unit ever gets or
# puts it, and the servers store what it puts, so the run is the cache over
# shards' (no servers) bit for bit: the same floats in the same order.
@test "rows: a cache in front of 1 or 2 servers trains, evaluates and exports bit for bit as a cache over shards" {
    cache_on_2 "$TMP/c0.json" 0
    args=(--data "$DATA/few" --threads 1 --cpu-fallback -q --no-rebalance --epochs 2 --metrics-interval 0
          --eval "$DATA/few")
    mpi2 "$HPS_BIN/hps-train" --plan "$TMP/c0.json" "${args[@]}" --metrics "$TMP/c0.ndjson" \
        --export "$TMP/c0.safetensors"
    losses "$TMP/c0.ndjson" > "$TMP/l0"
    evals "$TMP/c0.ndjson" > "$TMP/e0"
    [ "$(wc -l < "$TMP/l0")" -gt 150 ] && [ "$(wc -l < "$TMP/e0")" -eq 2 ]
    for n in 1 2; do
        cache_on_2 "$TMP/c$n.json" $n
        mpik $((2 + n)) "$HPS_BIN/hps-train" --plan "$TMP/c$n.json" "${args[@]}" --metrics "$TMP/c$n.ndjson" \
            --export "$TMP/c$n.safetensors"
        # evicted rows' updates survive the trip to the servers and back
        cmp "$TMP/l0" <(losses "$TMP/c$n.ndjson")
        cmp "$TMP/e0" <(evals "$TMP/c$n.ndjson")
        cmp "$TMP/c0.safetensors" "$TMP/c$n.safetensors"
        # the cache's statistics are the shards' (summed over the units)
        [ "$(dist_field "$TMP/c$n.ndjson" 'o["dist"]["device_rows"]' step)" = \
          "$(dist_field "$TMP/c0.ndjson" 'o["dist"]["device_rows"]' step)" ]
        # every server served rows: the misses' states and the lead's evaluation
        [ "$(rows_served "$TMP/c$n.ndjson" | wc -l)" -eq "$n" ]
        rows_served "$TMP/c$n.ndjson" | awk '$1 <= 0 {bad++} END {exit bad > 0}'
        # the tables' figures are the servers', summed: every row of the layer
        [ "$(dist_field "$TMP/c$n.ndjson" '[t["rows"] for t in o["tables"]]' summary)" = \
          "$(dist_field "$DATA/servers.ndjson" '[t["rows"] for t in o["tables"]]' summary)" ]
    done
}

# One process runs the same plan's cache in front of its host tables: the
# workers' dense gradients add in another order (an allreduce), so within
# 1e-4 as hbm replicas are (above), not bit for bit.
@test "rows: a cache in front of servers under mpirun follows one process's run of the same plan" {
    cache_on_2 "$TMP/c1.json" 1
    args=(--data "$DATA/few" --threads 1 --cpu-fallback -q --no-rebalance --eval "$DATA/few")
    "$HPS_BIN/hps-train" --plan "$TMP/c1.json" "${args[@]}" --micro-batches 2 --metrics "$TMP/one.ndjson" \
        --export "$TMP/one.safetensors"
    mpik 3 "$HPS_BIN/hps-train" --plan "$TMP/c1.json" "${args[@]}" --metrics "$TMP/three.ndjson" \
        --export "$TMP/three.safetensors"
    same_losses "$TMP/one.ndjson" "$TMP/three.ndjson"
    same_export "$TMP/one.safetensors" "$TMP/three.safetensors"
    [ "$(dist_field "$TMP/three.ndjson" '(o["workers"], o["servers"])')" = "(2, 1)" ]
    # the units' caches counted the workers' lookups: one process's
    [ "$(rows_stats "$TMP/three.ndjson" lookups)" = "$(rows_stats "$TMP/one.ndjson" lookups)" ]
}

# Summed over the units: every miss but the rows still cached at the end is
# written back (a unit's cache full since early on holds its capacity).
@test "rows: a cache in front of servers: misses less write-backs is the units' capacity; it resumes exactly" {
    cache_on_2 "$TMP/c1.json" 1
    resumes_whole "$TMP/c1.json" 3
    python3 - "$TMP/full.ndjson" "$(cat "$DATA/capacity")" <<'PY'
import json, sys
c = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["event"] == "summary"][-1]["rows"][0]
cap = int(sys.argv[2])
assert c["capacity"] == cap and c["hits"] + c["misses"] <= c["lookups"], c
assert c["write_backs"] > 0 and c["misses"] - c["write_backs"] == 2 * cap, (c, cap)
PY
    # the servers saved the rows the units wrote back before the checkpoint
    [ -s "$TMP/ck/rank-2/ckpt-000000000100.hpsckpt" ]
}

@test "rows: a plan of compact or admitted tables keeps them on the servers, and hps-train runs it" {
    # hps-train's device rows are fp32 with per-element AdaGrad and no
    # admission: the planner offers HBM and a cache to those tables only
    for opt in "--row-dtype fp16" "--sparse-optimizer rowwise-adagrad" "--admit-after 2"; do
        # shellcheck disable=SC2086 # an option and its value
        "$HPS_BIN/hps-plan" -m "$MODEL" -c "$TESTDATA/clusters/lab.json" -p "$DATA/p.json" \
            --min-throughput 20000 --algo exact $opt -o "$TMP/c.json"
        [ "$(json_field "$TMP/c.json" 'd["stages"][0]["rows"]')" = servers ]
        "$HPS_BIN/hps-train" --plan "$TMP/c.json" --data "$DATA/few" --threads 1 --cpu-fallback -q --steps 3
    done
}
