#!/usr/bin/env bats
# hps-train under mpirun (hps-train(1), DISTRIBUTED): ranks from the plan,
# the single-process loss trajectory, rebalancing a slowed rank, a killed rank
# and its resume, a wrong rank count.  Every mpirun runs under `timeout`; no
# test compares wall-clock time against a threshold.

load helpers
load dist_helpers

TRAIN=$HPS_BIN/hps-train
TEST_TRAIN=$HPS_TEST_BIN/hps-train   # with --slowdown
PLAN=$TESTDATA/plans/plan-dist-2w1s.json   # 2 workers (ranks 0, 1), 1 server (rank 2)
MODEL=$TESTDATA/models/demo-ctr.json

setup() {
    command -v mpirun >/dev/null || skip "mpirun is not installed (make deps: openmpi-bin)"
    built_with_mpi "$TRAIN" || skip "hps-train was built without Open MPI (make MPI=0)"
    TMP=$(mktemp -d)
    mpi_test_env
    "$HPS_BIN/hps-shard" synth 4000 -o "$TMP/x.tsv" 2>/dev/null
    "$HPS_BIN/hps-shard" -m "$MODEL" -n 2 -o "$TMP/shards" "$TMP/x.tsv" 2>/dev/null
}

teardown() {
    rm -rf "$TMP"
}

mpi() {
    local np=$1
    shift
    timeout 120 mpirun --oversubscribe -np "$np" "$@"
}



@test "dist: every --help option is in the man page and both completions" {
    check_options_documented hps-train
}

@test "dist: a rank count that does not fit the plan is refused, naming what it needs" {
    run mpi 2 "$TRAIN" --plan "$PLAN" --data "$TMP/shards"
    [ "$status" -ne 0 ]
    [[ "$output" == *"hps-train: error: "*"plan-dist-2w1s.json: the plan needs 3 ranks (2 workers, 1 server), but mpirun started 2"* ]]
}

@test "dist: 3 ranks (2 workers, 1 server) follow the single-process loss trajectory" {
    "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --epochs 3 --threads 1 --micro-batches 2 \
        --metrics "$TMP/one.ndjson" --metrics-interval 0 -q
    mpi 3 "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --epochs 3 --threads 1 \
        --metrics "$TMP/dist.ndjson" --metrics-interval 0 -q
    same_losses "$TMP/one.ndjson" "$TMP/dist.ndjson"
    [ "$(dist_field "$TMP/dist.ndjson" 'o["servers"]')" = 1 ]
    [ "$(dist_field "$TMP/dist.ndjson" 'o["per_rank"][2]["rows_served"] > 0')" = True ]
    # each step's two round trips, as each worker waited for them and the server computed them
    [ "$(dist_field "$TMP/dist.ndjson" '[r["fetch_ms"] > 0 and r["push_ms"] > 0 for r in o["per_rank"][:2]]')" = "[True, True]" ]
    [ "$(dist_field "$TMP/dist.ndjson" '(o["per_rank"][2]["serve_ms"] > 0, o["per_rank"][2]["apply_ms"] > 0)')" = "(True, True)" ]
    # the prediction each run is compared with: the ranks', or one process's
    [ "$(dist_field "$TMP/dist.ndjson" 'o["predicted_for"]' summary)" = ranks ]
    [ "$(dist_field "$TMP/one.ndjson" 'o["predicted_for"]' summary)" = "one process" ]
}

@test "dist: a plan priced on a profile of the shards predicts the bytes a step sends to its server" {
    "$HPS_BIN/hps-profile" --machine "$(machine_profile)" -q -m "$MODEL" -D cpu:1 -r 3 --min-time 0 --data "$TMP/shards" -o "$TMP/p.json"
    printf '%s' '{"format": "hps-cluster", "version": 1, "name": "one", "resources": [{"name": "a", "kind": "cpu",
        "device": "cpu:1", "price_per_hour": 1, "max_units": 2, "nic_gbps": 10}], "servers": {"type": "a"}}' \
        > "$TMP/c.json"
    "$HPS_BIN/hps-plan" -q -m "$MODEL" -c "$TMP/c.json" -p "$TMP/p.json" -t 1 -a fixed:a -o "$TMP/plan.json"
    mpi 2 "$TRAIN" --plan "$TMP/plan.json" --data "$TMP/shards" --steps 8 --threads 1 --metrics "$TMP/m.ndjson" -q
    # each distinct row a batch names, fetched and pushed once, with its
    # key: what the profile's exchange sent (every lookup's row both ways
    # is twice as much)
    ratio=$(dist_field "$TMP/m.ndjson" 'round(o["bytes_per_step"] / o["predicted_bytes_per_step"], 2)')
    python3 -c 'import sys; r = float(sys.argv[1]); assert 0.9 < r < 1.1, r' "$ratio"
}

@test "dist: a plan whose stage keeps rows on servers but counts none gets one on the next free rank" {
    # a hand-written plan (its stage says no rows, so they are on servers)
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["servers"]["count"]=0; p["servers"]["ranks"]=[]
json.dump(p,open(sys.argv[2],"w"))' "$PLAN" "$TMP/noserver.json"
    run mpi 3 "$TRAIN" --plan "$TMP/noserver.json" --model "$MODEL" --data "$TMP/shards" --steps 2 --threads 1 \
        --metrics "$TMP/dist.ndjson" -q
    [ "$status" -eq 0 ]
    [ "$(dist_field "$TMP/dist.ndjson" 'o["servers"]')" = 1 ]
}

@test "dist: a plan whose servers have a count but no ranks puts them on the lowest ranks no worker has" {
    # plan-3workers.json: workers on ranks 0, 2 and 1, servers {"count": 2}
    # with no "ranks" (hps-plan(5)): the servers are ranks 3 and 4.  It has
    # no stages: its workers and servers take those of the demo's plan.
    python3 -c 'import json,sys; w = json.load(open(sys.argv[1])); assert "ranks" not in w["servers"], w
p = json.load(open(sys.argv[2])); p["workers"], p["servers"] = w["workers"], w["servers"]
p["stages"][0]["units"] = 3; json.dump(p, open(sys.argv[3], "w"))' \
        "$TESTDATA/plans/plan-3workers.json" "$PLAN" "$TMP/plan.json"
    run mpi 5 "$TRAIN" --plan "$TMP/plan.json" --model "$MODEL" --data "$TMP/shards" \
        --steps 2 --threads 1 --metrics "$TMP/dist.ndjson"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"rank 3 server 0"*"rank 4 server 1"* ]]
    [ "$(dist_field "$TMP/dist.ndjson" '(o["ranks"], o["workers"], o["servers"])')" = "(5, 3, 2)" ]
    [ "$(dist_field "$TMP/dist.ndjson" '[r["role"] for r in o["per_rank"]]')" = \
        "['worker', 'worker', 'worker', 'server', 'server']" ]
}

# A dense-only model (mlp-784), its data, and the plan hps-plan writes for
# it (servers count 0, stages that pull no rows), its one unit made two
# workers: a limit that needs 2 units would depend on the profile measured.
# The shards and the plan ($TMP/dshards, $TMP/dplan.json) are made once a
# file, in BATS_FILE_TMPDIR, and copied (make check's budget: a profile each).
dense_plan() {
    DMODEL=$TESTDATA/models/mlp-784.json
    if [ ! -e "$BATS_FILE_TMPDIR/dense/dplan.json" ]; then
        rm -rf "$BATS_FILE_TMPDIR/dense"
        mkdir -p "$BATS_FILE_TMPDIR/dense"
        TMP=$BATS_FILE_TMPDIR/dense dense_plan_make
    fi
    cp -r "$BATS_FILE_TMPDIR/dense/dshards" "$BATS_FILE_TMPDIR/dense/dplan.json" "$TMP/"
}

dense_plan_make() {
    python3 -c 'import random
r = random.Random(1)
for i in range(1024):
    print(r.randrange(10), " ".join(f"{j}:{r.random():.3f}" for j in sorted(r.sample(range(1, 785), 40))))' \
        > "$TMP/d.svm"
    "$HPS_BIN/hps-shard" -q --format libsvm --classes 10 --dense 784 --transform none -m "$DMODEL" -n 2 \
        -o "$TMP/dshards" "$TMP/d.svm"
    "$HPS_BIN/hps-profile" --machine "$(machine_profile)" -q -m "$DMODEL" -D cpu:1 -r 2 --min-time 0 -o "$TMP/dprof.json"
    cat > "$TMP/dc.json" <<'EOF'
{"format": "hps-cluster", "version": 1, "name": "here", "resources": [{"name": "t1", "kind": "cpu",
 "device": "cpu:1", "threads": 1, "price_per_hour": 1, "max_units": 2, "mem_gib": 8, "nic_gbps": 40}]}
EOF
    "$HPS_BIN/hps-plan" -q -m "$DMODEL" -c "$TMP/dc.json" -p "$TMP/dprof.json" -t 1 -o "$TMP/d1.json"
    python3 -c 'import json,sys; p = json.load(open(sys.argv[1]))
assert len(p["workers"]) == 1 and p["servers"]["count"] == 0 and p["servers"]["ranks"] == [], p
assert all(s["rows"] == "none" for s in p["stages"]), p["stages"]
p["stages"][0]["units"] = 2
p["workers"] = [dict(p["workers"][0], rank=r, share=0.5, batch_share=0.5) for r in (0, 1)]
p["inputs"]["model"] = sys.argv[3]  # copied to each test'"'"'s $TMP, at another depth
json.dump(p, open(sys.argv[2], "w"))' "$TMP/d1.json" "$TMP/dplan.json" "$(cd "$(dirname "$DMODEL")" && pwd)/mlp-784.json"
}

# A field of the last "summary" record.
summary_field() {
    python3 -c 'import json,sys
o = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["event"] == "summary"][-1]
print(eval(sys.argv[2], {}, {"o": o}))' "$1" "$2"
}

@test "dist: a dense-only plan of 2 workers runs on 2 ranks, no server, the single-process trajectory" {
    dense_plan
    "$TRAIN" --plan "$TMP/dplan.json" --data "$TMP/dshards" --epochs 3 --threads 1 --micro-batches 2 \
        --metrics "$TMP/one.ndjson" --metrics-interval 0 -q
    run mpi 2 "$TRAIN" --plan "$TMP/dplan.json" --data "$TMP/dshards" --epochs 3 --threads 1 \
        --metrics "$TMP/dist.ndjson" --metrics-interval 0
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"2 ranks: rank 0 worker 0 of stage 0, t1 on "*"; rank 1 worker 1 of stage 0, t1 on "* ]]
    same_losses "$TMP/one.ndjson" "$TMP/dist.ndjson"
    # each worker holding every row in memory copies its part of each batch: the same trajectory
    run mpi 2 "$TRAIN" --plan "$TMP/dplan.json" --data "$TMP/dshards" --epochs 3 --threads 1 --in-memory 64 \
        --metrics "$TMP/mem.ndjson" --metrics-interval 0
    [ "$status" -eq 0 ]
    [[ "$output" == *"--in-memory: "*" rows ("*" MiB) read into memory in "* ]]
    same_losses "$TMP/one.ndjson" "$TMP/mem.ndjson"
    [ "$(dist_field "$TMP/dist.ndjson" '(o["ranks"], o["workers"], o["servers"])')" = "(2, 2, 0)" ]
    [ "$(dist_field "$TMP/dist.ndjson" '[r["role"] for r in o["per_rank"]]')" = "['worker', 'worker']" ]
    # the summary: 3 epochs of 4 batches of 256 over both workers, and the
    # plan's prediction beside the measurement
    [ "$(summary_field "$TMP/dist.ndjson" '(o["steps"], o["samples"])')" = "(12, 3072)" ]
    predicted=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["predicted"]["throughput"])' "$TMP/dplan.json")
    [ "$(summary_field "$TMP/dist.ndjson" "abs(o['predicted_samples_per_s'] - $predicted) < 1e-3 * $predicted")" = True ]
    # the ranks a dense-only plan names, and no more
    run mpi 3 "$TRAIN" --plan "$TMP/dplan.json" --data "$TMP/dshards" --steps 2 --threads 1
    [ "$status" -ne 0 ]
    [[ "$output" == *"dplan.json: the plan needs 2 ranks (2 workers, 0 servers), but mpirun started 3: run mpirun -np 2"* ]]
}

@test "dist: a dense-only plan cut into 2 stages runs on 2 ranks, no server, the single-process trajectory" {
    dense_plan
    # the 2-worker plan's units as stages: layers 0-1 on rank 0, 2-4 on rank 1
    python3 -c 'import json,sys; p = json.load(open(sys.argv[1])); s = p["stages"][0]
p["stages"] = [dict(s, index=0, layers=[0, 1], units=1), dict(s, index=1, layers=[2, 4], units=1)]
p["workers"] = [dict(w, stage=i, share=1.0) for i, w in enumerate(p["workers"])]
json.dump(p, open(sys.argv[2], "w"))' "$TMP/dplan.json" "$TMP/dstages.json"
    "$TRAIN" --plan "$TMP/dplan.json" --data "$TMP/dshards" --epochs 3 --threads 1 --micro-batches 2 \
        --metrics "$TMP/one.ndjson" --metrics-interval 0 -q
    mpi 2 "$TRAIN" --plan "$TMP/dstages.json" --data "$TMP/dshards" --epochs 3 --threads 1 --micro-batches 2 \
        --metrics "$TMP/dist.ndjson" --metrics-interval 0 -q
    same_losses "$TMP/one.ndjson" "$TMP/dist.ndjson"
    [ "$(dist_field "$TMP/dist.ndjson" '(o["ranks"], o["servers"], o["per_rank"][1]["samples"])')" = "(2, 0, 3072.0)" ]
}

@test "dist: a dense-only plan's ranks checkpoint and resume without a server" {
    dense_plan
    args=(--plan "$TMP/dplan.json" --data "$TMP/dshards" --threads 1 --checkpoint "$TMP/ck")
    mpi 2 "$TRAIN" "${args[@]}" --steps 2 -q
    [ "$(ls "$TMP/ck" | sort | tr '\n' ' ')" = "committed rank-0 rank-1 " ]
    run mpi 2 "$TRAIN" "${args[@]}" --epochs 3 --steps 5 --resume
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"resuming at step 2"* ]]
    [[ "$output" == *"5 steps, 1280 samples"* ]]
}

@test "dist: a dense-only job whose worker is killed ends, the survivor naming it" {
    dense_plan
    timeout 120 mpirun --oversubscribe -np 2 "$TEST_TRAIN" --plan "$TMP/dplan.json" --data "$TMP/dshards" \
        --threads 1 --epochs 400 --slowdown 0=4 --checkpoint "$TMP/ck" --checkpoint-every 2 > "$TMP/out" 2>&1 &
    job=$!
    for _ in $(seq 300); do [ -f "$TMP/ck/committed" ] && break; sleep 0.1; done
    [ -f "$TMP/ck/committed" ]
    kill_rank "$job" 1
    [ "$(grep -cE "hps-train: error: rank 1 \(worker 1 of stage 0, t1\) on host [^ ]+ stopped responding" "$TMP/out")" -eq 1 ]
}

@test "dist: a plan without servers for a model with embedding layers is refused, naming the layer" {
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["servers"]["count"]=0; p["servers"]["ranks"]=[]
p["stages"][0]["rows"]="none"; json.dump(p,open(sys.argv[2],"w"))' "$PLAN" "$TMP/noserver.json"
    run mpi 2 "$TRAIN" --plan "$TMP/noserver.json" --model "$MODEL" --data "$TMP/shards" --steps 2 --threads 1
    echo "$output"
    [ "$status" -eq 2 ]
    [[ "$output" == *"hps-train: error: "*"noserver.json: the plan has no parameter servers and its stages pull no embedding rows, but layer "*" of demo-ctr is an embedding: plan for this model"* ]]
}

@test "dist: --log-dir writes one log per rank, named by its role" {
    mpi 3 "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --steps 4 --threads 1 --log-dir "$TMP/logs"
    [ "$(ls "$TMP/logs" | sort | tr '\n' ' ')" = "server-2.log worker-0.log worker-1.log " ]
    grep -q "hps-train: 4 steps" "$TMP/logs/worker-0.log"
}

@test "dist: a rank slowed 3x loses share and trains fewer rows; static shares stay even" {
    mpi 3 "$TEST_TRAIN" --plan "$PLAN" --data "$TMP/shards" --epochs 3 --threads 1 --slowdown 1=3 \
        --metrics "$TMP/re.ndjson" -q
    mpi 3 "$TEST_TRAIN" --plan "$PLAN" --data "$TMP/shards" --epochs 3 --threads 1 --slowdown 1=3 \
        --no-rebalance --metrics "$TMP/static.ndjson" -q
    # the shares, and the rows each worker trained by them (behaviour, not
    # time: no two timed runs are compared)
    [ "$(dist_field "$TMP/re.ndjson" 'o["per_rank"][1]["share"] < 0.4')" = True ]
    [ "$(dist_field "$TMP/re.ndjson" 'o["per_rank"][1]["samples"] < 0.8 * o["per_rank"][0]["samples"]')" = True ]
    [ "$(dist_field "$TMP/static.ndjson" 'o["per_rank"][1]["share"]')" = 0.5 ]
    [ "$(dist_field "$TMP/static.ndjson" 'o["per_rank"][1]["samples"] == o["per_rank"][0]["samples"]')" = True ]
}

# Kills rank $2 of the job $1 (an mpirun under `timeout`, its output in
# $TMP/out), which must then end on its own: not 0, and not by the timeout.
kill_rank() {
    kill -9 "$(rank_pid "$1" "$2")"
    local rc=0
    wait "$1" || rc=$?
    cat "$TMP/out"
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]
}

# The pids of mpirun's ranks (children of the mpirun under `timeout` $1).
rank_pid() {
    local mp p
    mp=$(pgrep -P "$1" | head -1)
    for p in $(pgrep -P "$mp"); do
        tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && echo "$p"
    done
}

@test "dist: killing a rank ends the job, the commit stays whole, resume continues" {
    args=(--plan "$PLAN" --data "$TMP/shards" --threads 1 --checkpoint "$TMP/ck" --checkpoint-every 2)
    timeout 120 mpirun --oversubscribe -np 3 "$TEST_TRAIN" "${args[@]}" --epochs 40 --slowdown 0=4 \
        > "$TMP/out" 2>&1 &
    job=$!
    for _ in $(seq 300); do [ -f "$TMP/ck/committed" ] && break; sleep 0.1; done
    [ -f "$TMP/ck/committed" ]
    kill_rank "$job" 2
    grep -q "rank 2" "$TMP/out"
    grep -q "rank 2 server 0" "$TMP/out"          # the lead's role map, said at the start
    # a survivor names the dead rank with its role (dist_watch.c), once
    [ "$(grep -cE "hps-train: error: rank 2 \(server 0\) on host [^ ]+ stopped responding" "$TMP/out")" -eq 1 ]
    step=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["step"])' "$TMP/ck/committed")
    for r in 0 1 2; do [ -f "$TMP/ck/rank-$r/ckpt-$(printf %012d "$step").hpsckpt" ]; done
    run mpi 3 "$TRAIN" "${args[@]}" --epochs 3 --resume
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"resuming at step $step"* ]]
    [[ "$output" == *"12 steps, 12000 samples"* ]]
}

@test "dist: a kill during the commit leaves the last commit in force; the next commit removes its temporary" {
    args=(--plan "$PLAN" --data "$TMP/shards" --threads 1 --checkpoint "$TMP/ck" --checkpoint-every 2)
    # the lead dies between writing committed's temporary and renaming it
    run env HPS_CRASH_AT=before-rename:committed timeout 120 mpirun --oversubscribe -x HPS_CRASH_AT \
        -np 3 "$TEST_TRAIN" "${args[@]}" --steps 4
    [ "$status" -ne 0 ]
    ls "$TMP/ck" | grep -q '^committed\.tmp\.'
    [ ! -e "$TMP/ck/committed" ]
    run mpi 3 "$TRAIN" "${args[@]}" --steps 4 --resume
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["step"])' "$TMP/ck/committed")" -eq 4 ]
    [ -z "$(ls "$TMP/ck" | grep '\.tmp\.')" ]
}

@test "dist: --export under mpirun writes one process's model (2 workers; 2 stages on 2+1)" {
    "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --epochs 2 --threads 1 --micro-batches 2 \
        --export "$TMP/one.safetensors" -q
    mpi 3 "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --epochs 2 --threads 1 \
        --export "$TMP/dist.safetensors" -q
    same_export "$TMP/one.safetensors" "$TMP/dist.safetensors"
    # stages on different ranks: the lead gets stage 1's weights first
    mpi 4 "$TRAIN" --plan "$TESTDATA/plans/plan-dist-2s-4r.json" --data "$TMP/shards" --epochs 2 \
        --threads 1 --export "$TMP/st.safetensors" -q
    same_export "$TMP/one.safetensors" "$TMP/st.safetensors"
}

@test "dist: --probe under mpirun times the lead's host and writes one profile" {
    run mpi 3 "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --threads 1 --probe 2 -o "$TMP/p.json"
    echo "$output"
    [ "$status" -eq 0 ]
    python3 -c 'import json,sys; d = json.load(open(sys.argv[1])); assert d["devices"], d' "$TMP/p.json"
}

@test "dist: one process does not take a distributed checkpoint for its own, nor mpirun one process's" {
    mpi 3 "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --threads 1 --steps 2 --checkpoint "$TMP/ck" -q
    [ -f "$TMP/ck/committed" ]
    run "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --threads 1 --checkpoint "$TMP/ck" --resume --steps 3
    # one process reads DIR/latest, which a distributed run does not write:
    # it says what the directory holds (it said "no checkpoint yet" and
    # started afresh beside the job's checkpoints)
    [ "$status" -eq 2 ]
    [ "$output" = "hps-train: error: $TMP/ck: holds the checkpoints of an mpirun job ($TMP/ck/committed), not of one process: resume it under mpirun with the plan and rank count that wrote it, or use another directory" ]
    [ ! -e "$TMP/ck/latest" ]
    # and the other way round
    "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --threads 1 --steps 2 --checkpoint "$TMP/one" -q
    run mpi 3 "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --threads 1 --steps 3 --checkpoint "$TMP/one" --resume
    [ "$status" -eq 2 ]
    [[ "$output" == *"$TMP/one: holds the checkpoints of one process ($TMP/one/latest), not of an mpirun job: resume it without mpirun, or use another directory"* ]]
    [ ! -e "$TMP/one/committed" ]
}

@test "dist: a server builds and saves its tables alone; a worker's checkpoint is refused for it" {
    mpi 3 "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --threads 1 --steps 2 --checkpoint "$TMP/ck" -q
    # rank 2 is the server: its checkpoint is a parameter server's (no dense
    # part), which one process refuses as such
    run "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --threads 1 --checkpoint "$TMP/ck/rank-2" --resume --steps 3
    [ "$status" -eq 2 ]
    [[ "$output" == *"hps-train: error: $TMP/ck/rank-2/ckpt-000000000002.hpsckpt: a parameter server's checkpoint, not a trainer's"* ]]
    # and a worker's checkpoint in the server's place is refused by the server
    cp "$TMP/ck/rank-0/ckpt-000000000002.hpsckpt" "$TMP/ck/rank-2/"
    run timeout 120 mpirun --oversubscribe -np 3 "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --threads 1 \
        --steps 3 --checkpoint "$TMP/ck" --resume
    [ "$status" -eq 2 ]
    [[ "$output" == *"rank 2 (server 0): $TMP/ck/rank-2/ckpt-000000000002.hpsckpt: a trainer's checkpoint, not a parameter server's"* ]]
}

@test "dist: --slowdown takes RANK=FACTOR" {
    run "$TEST_TRAIN" --plan "$PLAN" --data "$TMP/shards" --slowdown 1
    [ "$status" -eq 2 ]
    [[ "$output" == *"--slowdown: '1' is not RANK=FACTOR"* ]]
}

@test "dist: what users run has no testing aids (--slowdown, HPS_TRAIN_KILL_AT_STEP)" {
    run "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --slowdown 1=2
    [ "$status" -eq 2 ]
    [[ "$output" == *"unknown option '--slowdown'"* ]]
    run env HPS_TRAIN_KILL_AT_STEP=1 "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --steps 2 -q
    [ "$status" -eq 0 ]
}

# Stages on different ranks (dist_stage.c): stage 0's workers read the data
# and run layers 0-3, stage 1's run 4-6 on the activations and labels sent to
# them, and send the gradients back.

@test "dist: 2 stages on 2 workers and a server follow the single-process loss trajectory" {
    "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --epochs 3 --threads 1 --micro-batches 2 \
        --metrics "$TMP/one.ndjson" --metrics-interval 0 -q
    mpi 3 "$TRAIN" --plan "$TESTDATA/plans/plan-dist-2s-3r.json" --data "$TMP/shards" --epochs 3 \
        --threads 1 --micro-batches 2 --metrics "$TMP/dist.ndjson" --metrics-interval 0 -q
    same_losses "$TMP/one.ndjson" "$TMP/dist.ndjson"
    # stage 1's worker trained on what stage 0 sent it, and sent gradients back
    [ "$(dist_field "$TMP/dist.ndjson" 'o["per_rank"][1]["bytes_sent"] > 1e6')" = True ]
    [ "$(dist_field "$TMP/dist.ndjson" 'o["per_rank"][1]["samples"]')" = 12000.0 ]
    # each stage's time, measured on its own rank, beside the plan's
    python3 - "$TMP/dist.ndjson" <<'PY'
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["event"] == "step"]
for st in steps[-1]["stages"]:
    assert st["measured_ms"] > 0 and st["predicted_ms"] == 20, st
# and over the whole run in the summary, beside the plan's (no predicted samples/s in this plan)
summary = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["event"] == "summary"][-1]
assert [st["predicted_ms"] for st in summary["stages"]] == [20, 20], summary
assert all(st["measured_ms"] > 0 for st in summary["stages"]) and summary["predicted_samples_per_s"] is None, summary
PY
}

@test "dist: 2 stages on 2+1 workers and a server follow the single-process loss trajectory" {
    "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --epochs 3 --threads 1 --micro-batches 2 \
        --metrics "$TMP/one.ndjson" --metrics-interval 0 -q
    mpi 4 "$TRAIN" --plan "$TESTDATA/plans/plan-dist-2s-4r.json" --data "$TMP/shards" --epochs 3 \
        --threads 1 --metrics "$TMP/dist.ndjson" --metrics-interval 0 -q
    same_losses "$TMP/one.ndjson" "$TMP/dist.ndjson"
}



@test "dist: --eval under mpirun gives one process's evaluation (2 workers; 2 stages on 2+1)" {
    # the lead evaluates; rows other workers trained come read-only from the servers
    "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --epochs 2 --threads 1 --micro-batches 2 \
        --eval "$TMP/shards" --metrics "$TMP/one.ndjson" --metrics-interval 0 -q
    mpi 3 "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --epochs 2 --threads 1 \
        --eval "$TMP/shards" --metrics "$TMP/dist.ndjson" --metrics-interval 0 -q
    same_evals "$TMP/one.ndjson" "$TMP/dist.ndjson"
    # with stages on different ranks the lead gets the other stage's weights first
    mpi 4 "$TRAIN" --plan "$TESTDATA/plans/plan-dist-2s-4r.json" --data "$TMP/shards" --epochs 2 \
        --threads 1 --eval "$TMP/shards" --metrics "$TMP/st.ndjson" --metrics-interval 0 -q
    same_evals "$TMP/one.ndjson" "$TMP/st.ndjson"
}

# A copy of plan $1 with its two stages cut before layer $3, to $2.
cut_plan() {
    python3 -c 'import json,sys
p = json.load(open(sys.argv[1]))
c, last = int(sys.argv[3]), p["stages"][1]["layers"][1]
p["stages"][0]["layers"], p["stages"][1]["layers"] = [0, c - 1], [c, last]
json.dump(p, open(sys.argv[2], "w"))' "$@"
}

@test "dist: a cut before the merge layer sends both streams and follows one process" {
    # dlrm-criteo: emb_a, emb_b, bottom1, bottom2, interact, top1, out, loss
    DM=$TESTDATA/models/dlrm-criteo.json
    "$HPS_BIN/hps-shard" -m "$DM" -o "$TMP/dl" "$TMP/x.tsv" 2>/dev/null
    cut_plan "$TESTDATA/plans/plan-dist-dlrm-cut3.json" "$TMP/cut2.json" 2
    args=(-m "$DM" --data "$TMP/dl" --epochs 2 --threads 1 --micro-batches 2 --eval "$TMP/dl"
          --metrics-interval 0 -q)
    "$TRAIN" --plan "$TESTDATA/plans/plan-dist-dlrm-cut3.json" "${args[@]}" --metrics "$TMP/one.ndjson"
    # after bottom1: its output and its gradient cross; before it: the raw dense features
    for p in "$TESTDATA/plans/plan-dist-dlrm-cut3.json" "$TMP/cut2.json"; do
        mpi 3 "$TRAIN" --plan "$p" "${args[@]}" --metrics "$TMP/d.ndjson"
        same_losses "$TMP/one.ndjson" "$TMP/d.ndjson"
        same_evals "$TMP/one.ndjson" "$TMP/d.ndjson"
    done
    # demo-ctr cut right after its embedding layer
    cut_plan "$TESTDATA/plans/plan-dist-2s-3r.json" "$TMP/cut1.json" 1
    "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --epochs 3 --threads 1 --micro-batches 2 \
        --metrics "$TMP/one.ndjson" --metrics-interval 0 -q
    mpi 3 "$TRAIN" --plan "$TMP/cut1.json" -m "$MODEL" --data "$TMP/shards" --epochs 3 \
        --threads 1 --micro-batches 2 --metrics "$TMP/d.ndjson" --metrics-interval 0 -q
    same_losses "$TMP/one.ndjson" "$TMP/d.ndjson"
}

# plan-dist-dlrm-cut3's ranks (a worker per stage, a server) for graph
# model $1, its two stages cut before layer $3, to $2.
graph_cut_plan() {
    # the model's digest as hps-profile writes it, once a file, not once a
    # plan (make check's budget: a profile is most of a plan's cost)
    local digest=$BATS_FILE_TMPDIR/$(basename "$1").digest
    if [ ! -s "$digest" ]; then
        "$HPS_BIN/hps-profile" --machine "$(machine_profile)" -m "$1" -D cpu:1 -b 16 -r 1 --min-time 0 --warmup 0 --no-scaling -q |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["model"]["digest"])' > "$digest.tmp"
        mv "$digest.tmp" "$digest"
    fi
    python3 -c 'import json,sys
p = json.load(open(sys.argv[1]))
m = json.load(open(sys.argv[2]))
c, n = int(sys.argv[4]), len(m["layers"])
p["digests"]["model"], p["inputs"]["model"] = sys.argv[5], sys.argv[2]
p["model"] = {"batch": m["batch"], "layers": n}
p["stages"][0]["layers"], p["stages"][1]["layers"] = [0, c - 1], [c, n - 1]
json.dump(p, open(sys.argv[3], "w"))' "$TESTDATA/plans/plan-dist-dlrm-cut3.json" "$1" "$2" "$3" "$(cat "$digest")"
}

@test "dist: a graph cut after its table layers sends the live set and follows one process" {
    # deepfm: emb, linear, fm, deep_in, fc1, fc2, deep, logit (add), loss
    DM=$TESTDATA/models/deepfm.json
    "$HPS_BIN/hps-shard" -m "$DM" -o "$TMP/fm" "$TMP/x.tsv" 2>/dev/null
    args=(-m "$DM" --data "$TMP/fm" --epochs 2 --threads 1 --micro-batches 2 --metrics-interval 0 -q)
    # the cut after layer 1 in one process: the cut after layer 2 (c=2
    # below) under mpirun gives its losses too (a cut before the linear
    # layer has a test of its own, below)
    graph_cut_plan "$DM" "$TMP/cut.json" 1
    "$TRAIN" --plan "$TMP/cut.json" "${args[@]}" --metrics "$TMP/one-cut1.ndjson"
    # before fm: emb, linear and the dense features cross; before fc1: the
    # wide and FM logits beside deep_in; before the add: the three logits
    for c in 2 4 7; do
        graph_cut_plan "$DM" "$TMP/cut.json" $c
        "$TRAIN" --plan "$TMP/cut.json" "${args[@]}" --metrics "$TMP/one.ndjson"
        mpi 3 "$TRAIN" --plan "$TMP/cut.json" "${args[@]}" --metrics "$TMP/d.ndjson"
        same_losses "$TMP/one.ndjson" "$TMP/d.ndjson"
        [ $c -ne 2 ] || same_losses "$TMP/one-cut1.ndjson" "$TMP/d.ndjson"
    done
}

# $1's workers: stage 0 on two ranks (shares 0.6, 0.4) feeding one stage 1
# worker, the rows on two servers (5 ranks), to $2.
two_to_one_plan() {
    python3 -c 'import json,sys
p = json.load(open(sys.argv[1]))
p["workers"] = [{"rank": 0, "stage": 0, "type": "cpu", "share": 0.6},
                {"rank": 1, "stage": 0, "type": "cpu", "share": 0.4},
                {"rank": 2, "stage": 1, "type": "cpu", "share": 1.0}]
p["stages"][0]["units"] = 2
p["servers"] = {"count": 2, "ranks": [3, 4], "routing": {"rule": "mix64-mod"}}
json.dump(p, open(sys.argv[2], "w"))' "$1" "$2"
}

# Killed after step 5 on $1 ranks of plan $2 (the caller's "${args[@]}",
# with --export) and resumed: the rest of the whole run's losses (metrics
# $3) and its model (export $4), exactly.
resumes_as_whole() {
    mpi "$1" "$TRAIN" --plan "$2" "${args[@]}" --steps 5 --checkpoint "$TMP/ck"
    mpi "$1" "$TRAIN" --plan "$2" "${args[@]}" --checkpoint "$TMP/ck" --resume \
        --metrics "$TMP/res.ndjson" --export "$TMP/res.st"
    losses "$3" | tail -n +6 > "$TMP/whole"
    losses "$TMP/res.ndjson" > "$TMP/resumed"
    [ "$(wc -l < "$TMP/resumed")" -ge 10 ]
    cmp "$TMP/whole" "$TMP/resumed"
    cmp "$4" "$TMP/res.st"
}

# deepfm cut before its linear layer ($TMP/cut.json: emb in stage 0, linear
# in stage 1), its shards ($TMP/fm), the run's arguments (args) and one
# process's run of it ($TMP/one.ndjson, $TMP/one.st)
deepfm_cut_one() {
    DM=$TESTDATA/models/deepfm.json
    "$HPS_BIN/hps-shard" -m "$DM" -o "$TMP/fm" "$TMP/x.tsv" 2>/dev/null
    graph_cut_plan "$DM" "$TMP/cut.json" 1
    args=(-m "$DM" --data "$TMP/fm" --epochs 2 --threads 1 --micro-batches 2 --eval "$TMP/fm"
          --metrics-interval 0 -q)
    "$TRAIN" --plan "$TMP/cut.json" "${args[@]}" --metrics "$TMP/one.ndjson" --export "$TMP/one.st"
}

@test "dist: a cut before the last table layer: the later stage fetches and pushes its rows, as one process" {
    # deepfm cut before its linear layer: emb in stage 0, linear (a table
    # layer: it reads the keys) in stage 1, whose worker loads the batch's
    # keys, fetches linear's rows from the server and pushes their gradients
    deepfm_cut_one
    mpi 3 "$TRAIN" --plan "$TMP/cut.json" "${args[@]}" --metrics "$TMP/d.ndjson" --export "$TMP/d.st"
    same_losses "$TMP/one.ndjson" "$TMP/d.ndjson"
    same_evals "$TMP/one.ndjson" "$TMP/d.ndjson"
    # one worker a stage sums as one process does: the same model, byte for byte
    cmp "$TMP/one.st" "$TMP/d.st"
    # two stage 0 workers feed the stage 1 worker: it loads both slices
    two_to_one_plan "$TMP/cut.json" "$TMP/cut5.json"
    mpi 5 "$TRAIN" --plan "$TMP/cut5.json" "${args[@]}" --metrics "$TMP/d5.ndjson"
    same_losses "$TMP/one.ndjson" "$TMP/d5.ndjson"
    same_evals "$TMP/one.ndjson" "$TMP/d5.ndjson"
    # killed after step 5 and resumed: the whole run's losses and model
    resumes_as_whole 3 "$TMP/cut.json" "$TMP/d.ndjson" "$TMP/d.st"
    # a chain in three stages: dlrm-criteo's second embedding layer (emb_b)
    # in the middle one, which passes stage 0's two micro-batches on
    "$HPS_BIN/hps-shard" -m "$TESTDATA/models/dlrm-criteo.json" -o "$TMP/dl" "$TMP/x.tsv" 2>/dev/null
    python3 -c 'import json,sys
p = json.load(open(sys.argv[1]))
p["stages"] = [dict(p["stages"][0], index=i, layers=r) for i, r in enumerate([[0, 0], [1, 3], [4, 7]])]
p["workers"] = [{"rank": i, "stage": i, "type": "cpu", "share": 1.0} for i in range(3)]
p["servers"]["ranks"] = [3]
json.dump(p, open(sys.argv[2], "w"))' "$TESTDATA/plans/plan-dist-dlrm-cut3.json" "$TMP/three.json"
    args=(-m "$TESTDATA/models/dlrm-criteo.json" --plan "$TMP/three.json" --data "$TMP/dl" --epochs 2 --threads 1
          --micro-batches 2 --metrics-interval 0 -q)
    "$TRAIN" "${args[@]}" --metrics "$TMP/one.ndjson"
    mpi 4 "$TRAIN" "${args[@]}" --metrics "$TMP/d.ndjson"
    same_losses "$TMP/one.ndjson" "$TMP/d.ndjson"
}

# $1 (deepfm cut before linear: emb in stage 0 on rank 0, linear in stage 1
# on rank 1) with servers of each stage's own, as hps-plan writes them
# (stages[].servers, servers_beside): $3 stage 0's, $4 stage 1's, each
# "COUNT apart" or "COUNT beside", the servers on ranks 2 on, to $2.
own_servers() {
    python3 -c 'import json,sys
p = json.load(open(sys.argv[1]))
st = [a.split() for a in sys.argv[3:5]]
for s, (n, where) in zip(p["stages"], st):
    s["servers"], s["servers_beside"] = int(n), where == "beside"
n = sum(int(a[0]) for a in st)
p["servers"] = {"count": n, "ranks": list(range(2, 2 + n)), "routing": {"rule": "mix64-mod"}}
json.dump(p, open(sys.argv[2], "w"))' "$@"
}

# Each server's layers with rows, by rank, from the "dist" record of $1.
held_layers() {
    dist_field "$1" '{r["rank"]: sorted(k for k, v in r["table_rows"].items() if v > 0) for r in o["per_rank"] if r["role"] == "server"}'
}

# The rows per layer that the servers of $1 hold, summed, equal the rows of
# one process's tables ($2's summary).
same_rows() {
    python3 -c 'import json,sys
rec = lambda f, e: [json.loads(l) for l in open(f) if json.loads(l)["event"] == e][-1]
held = {}
for r in rec(sys.argv[1], "dist")["per_rank"]:
    for k, v in r.get("table_rows", {}).items(): held[k] = held.get(k, 0) + v
one = {t["layer"]: t["rows"] for t in rec(sys.argv[2], "summary")["tables"]}
assert held == one and all(v > 0 for v in one.values()), (held, one)' "$1" "$2"
}

@test "dist: each stage's table layers live on its own servers, apart or beside, as the plan sized them" {
    # hps-plan sizes and prices a stage's servers for that stage's tables
    # (1.25 x tables / k in a unit host's room, beside): hps-train routes
    # each stage's table layers over those servers alone
    deepfm_cut_one
    # stage 0 beside its unit, stage 1 apart: the servers of their own come first
    own_servers "$TMP/cut.json" "$TMP/b.json" "1 beside" "1 apart"
    mpi 4 "$TRAIN" --plan "$TMP/b.json" "${args[@]}" --metrics "$TMP/b.ndjson"
    # rank 2 serves linear's rows alone: 4 bytes a row served (emb's are 32)
    [ "$(dist_field "$TMP/b.ndjson" 'round(o["per_rank"][2]["bytes_sent"] / o["per_rank"][2]["rows_served"])')" = 4 ]
    [ "$(held_layers "$TMP/b.ndjson")" = "{2: ['linear'], 3: ['emb']}" ]
    same_rows "$TMP/b.ndjson" "$TMP/one.ndjson"
    same_losses "$TMP/one.ndjson" "$TMP/b.ndjson"
    # stage 0: two servers of its own (ranks 2, 3); stage 1: one beside its unit (rank 4)
    own_servers "$TMP/cut.json" "$TMP/a.json" "2 apart" "1 beside"
    mpi 5 "$TRAIN" --plan "$TMP/a.json" "${args[@]}" --metrics "$TMP/a.ndjson" --export "$TMP/a.st"
    [ "$(held_layers "$TMP/a.ndjson")" = "{2: ['emb'], 3: ['emb'], 4: ['linear']}" ]
    # a server holds tables for its own stage's layers only
    [ "$(dist_field "$TMP/a.ndjson" '[sorted(r["table_rows"]) for r in o["per_rank"][2:]]')" = "[['emb'], ['emb'], ['linear']]" ]
    same_rows "$TMP/a.ndjson" "$TMP/one.ndjson"
    same_losses "$TMP/one.ndjson" "$TMP/a.ndjson"
    same_evals "$TMP/one.ndjson" "$TMP/a.ndjson"
    same_export "$TMP/one.st" "$TMP/a.st"
    # killed after step 5 and resumed: each server reloads its own stage's rows
    resumes_as_whole 5 "$TMP/a.json" "$TMP/a.ndjson" "$TMP/a.st"
    [ "$(held_layers "$TMP/res.ndjson")" = "{2: ['emb'], 3: ['emb'], 4: ['linear']}" ]
}

@test "dist: a plan whose stages count no servers spreads every table over all of them" {
    # older and hand-written plans: servers.count alone, every layer over every server
    DM=$TESTDATA/models/deepfm.json
    "$HPS_BIN/hps-shard" -m "$DM" -o "$TMP/fm" "$TMP/x.tsv" 2>/dev/null
    graph_cut_plan "$DM" "$TMP/cut.json" 1
    python3 -c 'import json,sys
p = json.load(open(sys.argv[1])); p["servers"] = {"count": 2, "ranks": [2, 3]}
json.dump(p, open(sys.argv[2], "w"))' "$TMP/cut.json" "$TMP/all.json"
    args=(-m "$DM" --data "$TMP/fm" --epochs 2 --threads 1 --metrics-interval 0 -q)
    "$TRAIN" --plan "$TMP/cut.json" "${args[@]}" --metrics "$TMP/one.ndjson"
    mpi 4 "$TRAIN" --plan "$TMP/all.json" "${args[@]}" --metrics "$TMP/d.ndjson"
    [ "$(held_layers "$TMP/d.ndjson")" = "{2: ['emb', 'linear'], 3: ['emb', 'linear']}" ]
    same_rows "$TMP/d.ndjson" "$TMP/one.ndjson"
    # a stage with a table layer and no servers, where the other counts its own: refused
    own_servers "$TMP/cut.json" "$TMP/bad.json" "2 apart" "0 apart"
    run mpi 4 "$TRAIN" --plan "$TMP/bad.json" "${args[@]}"
    [ "$status" -eq 2 ]
    [[ "$output" == *"hps-train: error: "*"bad.json: stage 1 runs table layer 1 ('linear') but counts no servers (stages[1].servers 0), while the other stages count their own: give it servers, or drop the stages' counts to spread every table over all 2 servers"* ]]
}

@test "dist: the rankfile hps-plan writes starts the plan's ranks under mpirun" {
    python3 - "$TESTDATA/clusters/lab.json" "$TMP/local.json" "$(nproc)" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["resources"] = [r for r in c["resources"] if r["kind"] == "cpu"]
c["links"] = []
# as many units as this machine has cores: a rankfile slot names a core, and mpirun
# refuses one the machine lacks; the server takes one of them (hps-cluster(5))
cores = max(2, int(sys.argv[3]))
c["nodes"] = [{"name": "localhost", "units": {"cpu": cores}}]
json.dump(c, open(sys.argv[2], "w"))
PY
    "$HPS_BIN/hps-plan" -m "$MODEL" -c "$TMP/local.json" -p "$TESTDATA/profiles/demo-ctr.json" \
        --min-throughput 1000 --rankfile "$TMP/ranks" -o "$TMP/plan.json"
    n=$(wc -l < "$TMP/ranks")
    [ "$n" -ge 2 ]
    "$HPS_BIN/hps-shard" -m "$MODEL" --plan "$TMP/plan.json" -o "$TMP/ps" "$TMP/x.tsv" 2>/dev/null
    run timeout 120 mpirun --oversubscribe --rankfile "$TMP/ranks" "$TRAIN" --plan "$TMP/plan.json" \
        --data "$TMP/ps" --epochs 1 --threads 1 --metrics "$TMP/m.ndjson"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"$n ranks: rank 0 worker 0 of stage 0, cpu"* ]]
    [ "$(dist_field "$TMP/m.ndjson" 'len(o["per_rank"])')" = "$n" ]
}

@test "dist: a killed stage worker ends the job; a survivor names its rank and role" {
    timeout 120 mpirun --oversubscribe -np 3 "$TEST_TRAIN" --plan "$TESTDATA/plans/plan-dist-2s-3r.json" \
        --data "$TMP/shards" --threads 1 --epochs 40 --slowdown 0=4 --metrics "$TMP/m.ndjson" \
        --metrics-interval 0 > "$TMP/out" 2>&1 &
    job=$!
    for _ in $(seq 300); do [ -s "$TMP/m.ndjson" ] && grep -q '"step"' "$TMP/m.ndjson" && break; sleep 0.1; done
    kill_rank "$job" 1
    [ "$(grep -cE "hps-train: error: rank 1 \(worker 1 of stage 1, cpu\) on host [^ ]+ stopped responding" "$TMP/out")" -eq 1 ]
}

@test "dist: stages on different ranks resume from the committed step to the same losses" {
    P=$TESTDATA/plans/plan-dist-2s-3r.json
    args=(--plan "$P" --data "$TMP/shards" --threads 1 --epochs 2 --metrics-interval 0 -q)
    mpi 3 "$TRAIN" "${args[@]}" --metrics "$TMP/full.ndjson"
    mpi 3 "$TRAIN" "${args[@]}" --steps 3 --checkpoint "$TMP/ck"
    mpi 3 "$TRAIN" "${args[@]}" --checkpoint "$TMP/ck" --resume --metrics "$TMP/res.ndjson"
    losses "$TMP/full.ndjson" | tail -n +4 > "$TMP/a"
    losses "$TMP/res.ndjson" > "$TMP/b"
    [ "$(wc -l < "$TMP/b")" -eq 5 ]
    cmp "$TMP/a" "$TMP/b"
}

# A worker and a server on 2 ranks: the plan of 2 workers cut to one.
one_worker_plan() {
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["workers"]=p["workers"][:1]
p["workers"][0]["share"]=1; p["stages"][0]["units"]=1; p["servers"]["ranks"]=[1]
json.dump(p,open(sys.argv[2],"w"))' "$PLAN" "$1"
}

@test "dist: ranks bound by mpirun's default run on every core, and yield while they wait" {
    [ "$(nproc)" -ge 2 ] || skip "one core: binding changes nothing"
    one_worker_plan "$TMP/1w1s.json"
    # np 2: Open MPI binds each rank to one core unless told otherwise
    mpi 2 "$TRAIN" --plan "$TMP/1w1s.json" --model "$MODEL" --data "$TMP/shards" --steps 4 --threads 1 \
        --metrics "$TMP/m.ndjson" -q
    [ "$(dist_field "$TMP/m.ndjson" '[r["cores"] for r in o["per_rank"]]')" = "[$(nproc), $(nproc)]" ]
    [ "$(dist_field "$TMP/m.ndjson" 'o["yield_when_idle"]')" = True ]
}

@test "dist: a binding or a busy wait the user asks for stays" {
    one_worker_plan "$TMP/1w1s.json"
    mpi 2 --bind-to core --mca mpi_yield_when_idle 0 "$TRAIN" --plan "$TMP/1w1s.json" --model "$MODEL" --data "$TMP/shards" \
        --steps 4 --threads 1 --metrics "$TMP/m.ndjson" -q
    [ "$(dist_field "$TMP/m.ndjson" '[r["cores"] for r in o["per_rank"]]')" = "[1, 1]" ]
    [ "$(dist_field "$TMP/m.ndjson" 'o["yield_when_idle"]')" = False ]
    # a rankfile's cores (as hps-plan --rankfile writes one) stay too
    printf 'rank 0=%s slot=0\nrank 1=%s slot=0\n' "$(hostname)" "$(hostname)" > "$TMP/ranks"
    mpi 2 --rankfile "$TMP/ranks" "$TRAIN" --plan "$TMP/1w1s.json" --model "$MODEL" --data "$TMP/shards" \
        --steps 4 --threads 1 --metrics "$TMP/r.ndjson" -q
    [ "$(dist_field "$TMP/r.ndjson" '[r["cores"] for r in o["per_rank"]]')" = "[1, 1]" ]
}

@test "dist: 2 stage-0 workers export one process's model but for the elements its own sum order moves" {
    # deepfm, stage 0 (emb) on two workers at the plan's shares 0.6/0.4
    # (--no-rebalance: the slices, hence the sums' order, do not follow
    # timing), linear and the rest on a third, two servers.  The steps sum
    # each worker's slice, then the workers, where one process sums its two
    # micro-batches: float tolerance, except where AdaGrad's first step met a
    # gradient near its eps (1e-8), lr * g / (|g| + eps) follows g's rounding.
    # One process cut into 1 micro-batch instead of 2 (the same sums in
    # another order) moves those elements as far: the bound same_export
    # takes from it (on this data, emb.C4's element 0.0619 against 0.0612
    # under mpirun and 0.0609 at --micro-batches 1; without the bound, this
    # export fails same_export)
    DM=$TESTDATA/models/deepfm.json
    "$HPS_BIN/hps-shard" -m "$DM" -o "$TMP/fm" "$TMP/x.tsv" 2>/dev/null
    graph_cut_plan "$DM" "$TMP/cut.json" 1
    two_to_one_plan "$TMP/cut.json" "$TMP/cut5.json"
    args=(-m "$DM" --data "$TMP/fm" --epochs 2 --threads 1 --metrics-interval 0 -q)
    "$TRAIN" --plan "$TMP/cut.json" "${args[@]}" --micro-batches 2 --export "$TMP/one.st"
    "$TRAIN" --plan "$TMP/cut.json" "${args[@]}" --micro-batches 1 --export "$TMP/mb1.st"
    mpi 5 "$TRAIN" --plan "$TMP/cut5.json" "${args[@]}" --micro-batches 2 --no-rebalance --export "$TMP/d5.st"
    run same_export "$TMP/one.st" "$TMP/d5.st" "$TMP/mb1.st"
    echo "$output"
    [ "$status" -eq 0 ]
    # dlrm-criteo the same way: its two table layers in stage 0
    "$HPS_BIN/hps-shard" -m "$TESTDATA/models/dlrm-criteo.json" -o "$TMP/dl" "$TMP/x.tsv" 2>/dev/null
    two_to_one_plan "$TESTDATA/plans/plan-dist-dlrm-cut3.json" "$TMP/dl5.json"
    args=(-m "$TESTDATA/models/dlrm-criteo.json" --data "$TMP/dl" --epochs 2 --threads 1 --metrics-interval 0 -q)
    "$TRAIN" --plan "$TMP/dl5.json" "${args[@]}" --micro-batches 2 --export "$TMP/one.st"
    "$TRAIN" --plan "$TMP/dl5.json" "${args[@]}" --micro-batches 1 --export "$TMP/mb1.st"
    mpi 5 "$TRAIN" --plan "$TMP/dl5.json" "${args[@]}" --micro-batches 2 --no-rebalance --export "$TMP/d5.st"
    same_export "$TMP/one.st" "$TMP/d5.st" "$TMP/mb1.st"
}
