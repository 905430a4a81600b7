#!/usr/bin/env bats
# hps-train under mpirun (hps-train(1), DISTRIBUTED): ranks from the plan,
# the single-process loss trajectory, rebalancing a slowed rank, a killed rank
# and its resume, a wrong rank count.  Every mpirun runs under `timeout`; no
# test compares wall-clock time against a threshold.

load helpers

TRAIN=$HPS_BIN/hps-train
PLAN=$TESTDATA/plans/plan-dist-2w1s.json   # 2 workers (ranks 0, 1), 1 server (rank 2)
MODEL=$TESTDATA/models/demo-ctr.json

setup() {
    command -v mpirun >/dev/null || skip "mpirun is not installed (make deps: openmpi-bin)"
    TMP=$(mktemp -d)
    # root (CI, containers): Open MPI refuses to start without these
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    # sanitizer builds (make asan): Open MPI's own allocations at exit are not
    # ours.  Its components stay loaded and stacks are unwound in full, so that
    # tests/lsan-mpi.supp can name the libraries they come from.
    export OMPI_MCA_mca_base_component_disable_dlclose=1
    export LSAN_OPTIONS="suppressions=$ROOT/tests/lsan-mpi.supp:print_suppressions=0:fast_unwind_on_malloc=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
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

# The "step" losses of a metrics file, one per line.
losses() {
    python3 -c 'import json,sys
for l in open(sys.argv[1]):
    o = json.loads(l)
    if o["event"] == "step": print(o["loss"])' "$1"
}

# A field of the "dist" record.
dist_field() {
    python3 -c 'import json,sys
o = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["event"] == "dist"][-1]
print(eval(sys.argv[2], {}, {"o": o}))' "$1" "$2"
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
    losses "$TMP/one.ndjson" > "$TMP/one"
    losses "$TMP/dist.ndjson" > "$TMP/dist"
    [ "$(wc -l < "$TMP/one")" -ge 12 ]
    [ "$(wc -l < "$TMP/one")" -eq "$(wc -l < "$TMP/dist")" ]
    # tolerance: 1e-4 relative per step (float sums in another order)
    paste "$TMP/one" "$TMP/dist" | awk '{d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4 * $1) bad++}
                                        END {exit bad > 0}'
    [ "$(dist_field "$TMP/dist.ndjson" 'o["servers"]')" = 1 ]
    [ "$(dist_field "$TMP/dist.ndjson" 'o["per_rank"][2]["rows_served"] > 0')" = True ]
}

@test "dist: a rank slowed 3x loses share, and the slowest worker's time falls" {
    mpi 3 "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --epochs 3 --threads 1 --slowdown 1=3 \
        --metrics "$TMP/re.ndjson" -q
    mpi 3 "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --epochs 3 --threads 1 --slowdown 1=3 \
        --no-rebalance --metrics "$TMP/static.ndjson" -q
    [ "$(dist_field "$TMP/re.ndjson" 'o["per_rank"][1]["share"] < 0.4')" = True ]
    [ "$(dist_field "$TMP/static.ndjson" 'o["per_rank"][1]["share"]')" = 0.5 ]
    # both as the tool measured them: the sum over steps of the slowest
    # worker's compute (what a synchronous epoch waits for)
    re=$(dist_field "$TMP/re.ndjson" 'o["critical_s"]')
    st=$(dist_field "$TMP/static.ndjson" 'o["critical_s"]')
    echo "critical: rebalanced $re s, static $st s"
    python3 -c "import sys; sys.exit(not $re < $st)"
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
    timeout 120 mpirun --oversubscribe -np 3 "$TRAIN" "${args[@]}" --epochs 40 --slowdown 0=4 \
        > "$TMP/out" 2>&1 &
    job=$!
    for _ in $(seq 300); do [ -f "$TMP/ck/committed" ] && break; sleep 0.1; done
    [ -f "$TMP/ck/committed" ]
    kill -9 "$(rank_pid "$job" 2)"
    status=0
    wait "$job" || status=$?
    cat "$TMP/out"
    [ "$status" -ne 0 ] && [ "$status" -ne 124 ]   # ended, and not by the timeout
    grep -q "rank 2" "$TMP/out"
    grep -q "rank 2 server 0" "$TMP/out"          # the lead's role map, said at the start
    # a survivor names the dead rank with its role (dist_watch.c), once
    [ "$(grep -c "hps-train: error: rank 2 (server 0) stopped responding" "$TMP/out")" -eq 1 ]
    step=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["step"])' "$TMP/ck/committed")
    for r in 0 1 2; do [ -f "$TMP/ck/rank-$r/ckpt-$(printf %012d "$step").hpsckpt" ]; done
    run mpi 3 "$TRAIN" "${args[@]}" --epochs 3 --resume
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"resuming at step $step"* ]]
    [[ "$output" == *"12 steps, 12000 samples"* ]]
}

@test "dist: one process does not take a distributed checkpoint for its own" {
    mpi 3 "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --threads 1 --steps 2 --checkpoint "$TMP/ck" -q
    [ -f "$TMP/ck/committed" ]
    run "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --threads 1 --checkpoint "$TMP/ck" --resume --steps 3
    # one process reads DIR/latest, which a distributed run does not write
    [[ "$output" == *"no checkpoint yet"* ]]
}

@test "dist: --slowdown takes RANK=FACTOR" {
    run "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --slowdown 1
    [ "$status" -eq 2 ]
    [[ "$output" == *"--slowdown: '1' is not RANK=FACTOR"* ]]
}

# Stages on different ranks (dist_stage.c): stage 0's workers read the data
# and run layers 0-3, stage 1's run 4-6 on the activations and labels sent to
# them, and send the gradients back.
same_losses() {
    losses "$1" > "$TMP/a"
    losses "$2" > "$TMP/b"
    [ "$(wc -l < "$TMP/a")" -ge 12 ]
    [ "$(wc -l < "$TMP/a")" -eq "$(wc -l < "$TMP/b")" ]
    paste "$TMP/a" "$TMP/b" | awk '{d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4 * $1) bad++}
                                    END {exit bad > 0}'
}

@test "dist: 2 stages on 2 workers and a server follow the single-process loss trajectory" {
    "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --epochs 3 --threads 1 --micro-batches 2 \
        --metrics "$TMP/one.ndjson" --metrics-interval 0 -q
    mpi 3 "$TRAIN" --plan "$TESTDATA/plans/plan-dist-2s-3r.json" --data "$TMP/shards" --epochs 3 \
        --threads 1 --micro-batches 2 --metrics "$TMP/dist.ndjson" --metrics-interval 0 -q
    same_losses "$TMP/one.ndjson" "$TMP/dist.ndjson"
    # stage 1's worker trained on what stage 0 sent it, and sent gradients back
    [ "$(dist_field "$TMP/dist.ndjson" 'o["per_rank"][1]["bytes_sent"] > 1e6')" = True ]
}

@test "dist: 2 stages on 2+1 workers and a server follow the single-process loss trajectory" {
    "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --epochs 3 --threads 1 --micro-batches 2 \
        --metrics "$TMP/one.ndjson" --metrics-interval 0 -q
    mpi 4 "$TRAIN" --plan "$TESTDATA/plans/plan-dist-2s-4r.json" --data "$TMP/shards" --epochs 3 \
        --threads 1 --metrics "$TMP/dist.ndjson" --metrics-interval 0 -q
    same_losses "$TMP/one.ndjson" "$TMP/dist.ndjson"
}

@test "dist: stages on different ranks cut before the merge layer are refused" {
    python3 -c 'import json,sys
p = json.load(open(sys.argv[1]))
p["stages"][0]["layers"], p["stages"][1]["layers"] = [0, 0], [1, 6]
json.dump(p, open(sys.argv[2], "w"))' "$TESTDATA/plans/plan-dist-2s-3r.json" "$TMP/cut.json"
    run mpi 3 "$TRAIN" -m "$MODEL" --plan "$TMP/cut.json" --data "$TMP/shards" --steps 2 -q
    echo "$output"
    [ "$status" -eq 2 ]
    [[ "$output" == *"hps-train: error: "*"cut.json: stage 1 starts at layer 1 ('concat'), before the merge layer"* ]]
    [ "$(grep -c "hps-train: error" <<< "$output")" -eq 1 ]
    run mpi 3 "$TRAIN" --plan "$TESTDATA/plans/plan-dist-2s-3r.json" --data "$TMP/shards" \
        --eval "$TMP/shards" --steps 2 -q
    [ "$status" -eq 2 ]
    [[ "$output" == *"--eval is not available with stages on different ranks"* ]]
}

@test "dist: a killed stage worker ends the job; a survivor names its rank and role" {
    timeout 120 mpirun --oversubscribe -np 3 "$TRAIN" --plan "$TESTDATA/plans/plan-dist-2s-3r.json" \
        --data "$TMP/shards" --threads 1 --epochs 40 --slowdown 0=4 --metrics "$TMP/m.ndjson" \
        --metrics-interval 0 > "$TMP/out" 2>&1 &
    job=$!
    for _ in $(seq 300); do [ -s "$TMP/m.ndjson" ] && grep -q '"step"' "$TMP/m.ndjson" && break; sleep 0.1; done
    kill -9 "$(rank_pid "$job" 1)"
    status=0
    wait "$job" || status=$?
    cat "$TMP/out"
    [ "$status" -ne 0 ] && [ "$status" -ne 124 ]   # ended, and not by the timeout
    [ "$(grep -c "hps-train: error: rank 1 (worker 1 of stage 1, cpu) stopped responding" "$TMP/out")" -eq 1 ]
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
